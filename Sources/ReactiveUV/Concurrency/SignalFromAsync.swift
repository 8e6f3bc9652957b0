extension Signal {
    /// A signal that runs `operation` in a task for each subscriber and sends its result, then completes.
    ///
    /// The task prefers the subscription's home loop as its executor. A thrown error fails the
    /// signal. Disposing cancels the task; so does the home loop's shutdown, which fails the signal
    /// with `EventLoopError.shutDown`.
    ///
    /// Thread rule: safe from any thread.
    public static func async(
        priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable () async throws -> Value
    ) -> Signal<Value> {
        Signal { subscriber in
            let target = UncheckedSendable(subscriber)
            let body: @Sendable () async -> Void = {
                do {
                    let value = try await operation()
                    let box = UncheckedSendable(value)
                    target.value.sendNext(box.value)
                    target.value.sendCompleted()
                } catch {
                    target.value.sendError(error)
                }
            }
            return runTask(for: subscriber, priority: priority, body)
        }.debugNamed("+async")
    }

    /// A signal that iterates `sequence` in a task for each subscriber, sending each element.
    ///
    /// The sequence's end completes the signal and its error fails it. Disposing cancels the task
    /// (at the next suspension point). The task prefers the subscription's home loop, whose
    /// shutdown cancels it and fails the signal with `EventLoopError.shutDown`.
    ///
    /// Thread rule: safe from any thread.
    public static func from<S: AsyncSequence & Sendable>(_ sequence: S) -> Signal<Value> where S.Element == Value {
        Signal { subscriber in
            let target = UncheckedSendable(subscriber)
            let body: @Sendable () async -> Void = {
                do {
                    for try await element in sequence {
                        if Task.isCancelled || target.value.isDisposed { return }
                        let box = UncheckedSendable(element)
                        target.value.sendNext(box.value)
                    }
                    target.value.sendCompleted()
                } catch {
                    target.value.sendError(error)
                }
            }
            return runTask(for: subscriber, priority: nil, body)
        }.debugNamed("+from: async sequence")
    }

    /// Starts `body` in a task for `subscriber`, preferring its home loop; disposing cancels the task.
    /// The loop's shutdown cancels it and tells the subscriber, which would otherwise hear nothing.
    private static func runTask(for subscriber: Subscriber<Value>, priority: TaskPriority?,
                                _ body: @escaping @Sendable () async -> Void) -> any Disposable {
        guard let loop = subscriber.homeScheduler as? EventLoop else {
            let task = Task(priority: priority, operation: body)
            return ActionDisposable { task.cancel() }
        }
        let task = Task(executorPreference: loop, priority: priority, operation: body)
        let target = UncheckedSendable(subscriber)
        let name = loop.name
        let endByShutdown: @Sendable () -> Void = {
            task.cancel()
            target.value.sendError(EventLoopError.shutDown(loop: name))
        }
        // Registered on the home thread; nil when the loop is already closing.
        guard let watch = loop.shutdownObservers.add(endByShutdown) else {
            endByShutdown()
            return ActionDisposable { task.cancel() }
        }
        return ActionDisposable {
            watch.dispose()
            task.cancel()
        }
    }
}

extension Signal {
    /// A signal that runs `operation` in a task for each subscriber and sends its result, then completes.
    ///
    /// The task prefers the subscription's home loop as its executor, so the
    /// operation's synchronous parts run on the loop thread. A thrown error is
    /// sent as the signal's error. Disposing the subscription cancels the task.
    ///
    /// - Parameters:
    ///   - priority: The task's priority.
    ///   - operation: The work.
    /// - Returns: The signal.
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
            let task: Task<Void, Never>
            if let loop = subscriber.homeScheduler as? EventLoop {
                task = Task(executorPreference: loop, priority: priority, operation: body)
            } else {
                task = Task(priority: priority, operation: body)
            }
            return ActionDisposable { task.cancel() }
        }.debugNamed("+async")
    }

    /// A signal that iterates `sequence` in a task for each subscriber, sending each element.
    ///
    /// The sequence's end completes the signal and its error fails it.
    /// Disposing the subscription cancels the task (iteration stops at the next
    /// suspension point). The task prefers the subscription's home loop.
    ///
    /// - Parameter sequence: The async sequence.
    /// - Returns: The signal.
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
            let task: Task<Void, Never>
            if let loop = subscriber.homeScheduler as? EventLoop {
                task = Task(executorPreference: loop, operation: body)
            } else {
                task = Task(operation: body)
            }
            return ActionDisposable { task.cancel() }
        }.debugNamed("+from: async sequence")
    }
}

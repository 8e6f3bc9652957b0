/// Where an I/O signal's handle lives: the explicit loop, else the subscription's home loop.
enum LoopBinding {
    /// Runs `open` on the handle's loop thread and returns a disposable that undoes it there.
    ///
    /// - The loop is `explicit`, else the subscriber's home scheduler if that is
    ///   a loop; otherwise the subscriber gets a clear error.
    /// - When the caller is already on that loop, `open` runs now.
    /// - Otherwise it is queued to the loop; if the loop has shut down, the
    ///   subscriber gets `EventLoopError.shutDown`.
    /// - `family`, when given, names a family with no simulated backend: on a simulated loop the
    ///   subscriber gets its `ENOTSUP` refusal and nothing is opened.
    static func open<Value>(
        on explicit: EventLoop?,
        for subscriber: Subscriber<Value>,
        what: @autoclosure () -> String,
        refusingSimulation family: StaticString? = nil,
        _ open: @escaping (EventLoop) -> (any Disposable)?
    ) -> (any Disposable)? {
        guard let loop = explicit ?? (subscriber.homeScheduler as? EventLoop) else {
            subscriber.sendError(UVError(
                code: UVError.invalidArgumentCode,
                message: "\(what()) needs an EventLoop: subscribe on a loop thread or pass one with `on:` (home is \(subscriber.homeScheduler.schedulerDescription))"))
            return nil
        }
        if let family, loop.isSimulated {
            subscriber.sendError(loop.simulationRefusal(family, what: what()))
            return nil
        }
        if loop.inEventLoop {
            guard loop.acceptsNewHandles else {
                subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
                return nil
            }
            return open(loop)
        }
        let result = SerialDisposable()
        let box = UncheckedSendable(open)
        do {
            try loop.tryExecute {
                guard loop.acceptsNewHandles else {
                    subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
                    return
                }
                result.inner = box.value(loop)
            }
        } catch {
            subscriber.sendError(error)
            return nil
        }
        return result
    }

    /// Runs `start` for a source just made on the loop thread; returns the source, or nil after
    /// a failure, which disposes the source and ends `subscriber` with the error.
    static func started<Value>(_ source: any Disposable, for subscriber: Subscriber<Value>,
                               _ start: () throws -> Void) -> (any Disposable)? {
        do {
            try start()
        } catch {
            source.dispose()
            subscriber.sendError(error)
            return nil
        }
        return source
    }
}

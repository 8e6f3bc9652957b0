extension EventLoop {
    /// Calls `observer` once, on the loop's thread, when the loop begins shutting down.
    ///
    /// It runs before `shutdown()` returns, whoever asked: code that lives as long as the loop (a
    /// service in a `ServiceGroup`) learns the loop is going away. The observer must not block.
    ///
    /// - Returns: What unregisters the observer; nil (and `observer` is never called) when the loop
    ///   has begun closing, has closed, never started, or is `EventLoop.shared`.
    ///
    /// Thread rule: safe from any thread; `observer` runs on the loop's thread.
    public func onShutdown(_ observer: @escaping @Sendable () -> Void) -> (any Disposable)? {
        if isShared || startFailure != nil { return nil }
        // A shutdown that began before this line fires before `add`, which then returns nil.
        return shutdownObservers.add(observer)
    }
}

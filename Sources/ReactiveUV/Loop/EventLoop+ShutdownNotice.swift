extension EventLoop {
    /// Calls `observer` once, on the loop's thread, when the loop begins shutting down.
    ///
    /// It runs as the shutdown starts closing handles, before `shutdown()` (or
    /// `shutdownGracefully()`) returns, whoever asked for it: code that keeps
    /// something alive for as long as the loop (a service waiting in a
    /// `ServiceGroup`) learns that the loop is going away instead of waiting for ever.
    /// The observer must not block (it runs on the loop thread).
    ///
    /// - Parameter observer: Called at most once.
    /// - Returns: What unregisters the observer; nil when the loop has already
    ///   begun closing its handles, has closed, or never started (`startFailure`), or
    ///   is `EventLoop.shared` (never shut down): then `observer` is never called.
    ///
    /// Thread rule: safe from any thread; `observer` runs on the loop's thread.
    public func onShutdown(_ observer: @escaping @Sendable () -> Void) -> (any Disposable)? {
        if isShared || startFailure != nil { return nil }
        // A shutdown that began before this line fires before `add`, which then refuses (returns nil).
        return shutdownObservers.add(observer)
    }
}

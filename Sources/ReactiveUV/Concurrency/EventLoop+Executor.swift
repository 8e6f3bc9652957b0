/// An event loop is a serial executor (an actor can run on it) and a task executor
/// (`Task(executorPreference: loop)` runs its code on the loop thread).
///
/// Jobs go through the loop's run queues as they are, with no closure or other
/// allocation per job; each runs on the loop thread, isolated to the loop as
/// both its serial and its task executor, in the order it was enqueued.
extension EventLoop: SerialExecutor, TaskExecutor {
    /// Runs a job on the loop thread.
    ///
    /// After shutdown a job cannot be dropped (its task would never resume), so it
    /// runs at once on the calling thread, with a message saying so.
    ///
    /// - Parameter job: The job.
    ///
    /// Thread rule: safe from any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        if !enqueueItem(.job(unowned)) {
            reportMisuse("a job was enqueued on EventLoop '\(name)' after shutdown; it runs on the calling thread instead")
            unowned.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        }
    }

    /// This loop as an unowned serial executor (for an actor's `unownedExecutor`).
    ///
    /// - Returns: The executor reference.
    ///
    /// Thread rule: safe from any thread.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// This loop as an unowned task executor.
    ///
    /// - Returns: The executor reference.
    ///
    /// Thread rule: safe from any thread.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Traps unless called on the loop thread (Swift calls it for `assumeIsolated`).
    ///
    /// Thread rule: safe from any thread.
    public func checkIsolated() {
        precondition(inEventLoop, "expected to run on EventLoop '\(name)', but this is another thread")
    }

    /// Whether the calling code runs on this loop's thread.
    ///
    /// - Returns: `inEventLoop`.
    ///
    /// Thread rule: safe from any thread.
    public func isIsolatingCurrentContext() -> Bool? {
        inEventLoop
    }
}

/// An actor whose executor is an event loop: code isolated to it runs on the loop thread.
///
/// It has no state of its own. It is how async code says "I run on this loop": a
/// function that takes an `isolated LoopIsolation` parameter, or a task started with
/// `EventLoop.task(_:)`, runs on the loop thread, may touch `LoopBound` values there,
/// and calls actors on the same loop (actors whose `unownedExecutor` is
/// `loop.asUnownedSerialExecutor()`) without a hop through the loop's queue: Swift
/// enters a callee inline when it shares the caller's serial executor.
///
/// Every `LoopIsolation` of one loop shares that loop's serial executor, so they are
/// interchangeable: `loop.isolation` makes a new one each time it is read.
///
/// Thread rule: safe from any thread; its isolated code runs on the loop thread.
public actor LoopIsolation {
    /// The loop this isolation runs on.
    ///
    /// Thread rule: safe from any thread.
    public nonisolated let loop: EventLoop

    /// An isolation for `loop`.
    ///
    /// - Parameter loop: The loop whose thread runs the isolated code.
    ///
    /// Thread rule: safe from any thread.
    public init(_ loop: EventLoop) {
        self.loop = loop
    }

    /// The loop's serial executor.
    ///
    /// Thread rule: safe from any thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        loop.asUnownedSerialExecutor()
    }
}

extension EventLoop {
    /// This loop as an actor, for code that should run isolated to the loop
    /// (an `isolated LoopIsolation` parameter; see `task(priority:_:)`).
    ///
    /// Thread rule: safe from any thread.
    public var isolation: LoopIsolation { LoopIsolation(self) }

    /// Starts a task whose code is isolated to this loop.
    ///
    /// The operation runs on the loop thread. Calls from it to actors on this loop
    /// need no hop (the caller and the callee share the loop's serial executor), which
    /// makes them cheaper than calls between actors on Swift's default executor; see
    /// BENCHMARKS.md ("actor calls"). Nonisolated async functions it awaits run where
    /// Swift runs them (the global executor), as from any actor; for a task that keeps
    /// *all* its code on the loop, nonisolated code included, use
    /// `Task(executorPreference: loop)`, which enters an actor on the loop through the
    /// loop's queue and comes back the same way.
    ///
    /// - Parameters:
    ///   - priority: The task's priority.
    ///   - operation: The work, given the loop's isolation.
    /// - Returns: The task.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func task<Success: Sendable>(
        priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable (isolated LoopIsolation) async throws -> Success
    ) -> Task<Success, any Error> {
        let isolation = self.isolation
        return Task(priority: priority) { try await operation(isolation) }
    }

    /// Starts a task whose code is isolated to this loop (an operation that cannot throw).
    ///
    /// See `task(priority:_:)` for the throwing form.
    ///
    /// - Parameters:
    ///   - priority: The task's priority.
    ///   - operation: The work, given the loop's isolation.
    /// - Returns: The task.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func task<Success: Sendable>(
        priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable (isolated LoopIsolation) async -> Success
    ) -> Task<Success, Never> {
        let isolation = self.isolation
        return Task(priority: priority) { await operation(isolation) }
    }
}

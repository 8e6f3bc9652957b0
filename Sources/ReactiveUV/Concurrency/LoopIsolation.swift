/// An actor whose executor is an event loop: code isolated to it runs on the loop thread.
///
/// A function taking an `isolated LoopIsolation`, or a task from `EventLoop.task(_:)`, runs on
/// the loop thread, may touch `LoopBound` values, and calls actors on the same loop without a
/// hop. Every `LoopIsolation` of one loop shares its serial executor, so they are interchangeable.
///
/// Thread rule: safe from any thread; its isolated code runs on the loop thread.
public actor LoopIsolation {
    /// The loop this isolation runs on.
    ///
    /// Thread rule: safe from any thread.
    public nonisolated let loop: EventLoop

    /// An isolation for `loop`.
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
    /// This loop as an actor (a new `LoopIsolation` each time), for an `isolated LoopIsolation` parameter.
    ///
    /// Thread rule: safe from any thread.
    public var isolation: LoopIsolation { LoopIsolation(self) }

    /// Starts a task whose code is isolated to this loop.
    ///
    /// Calls from it to actors on this loop need no hop. Nonisolated async functions it awaits run
    /// on the global executor, as from any actor; to keep *all* of a task's code on the loop, use
    /// `Task(executorPreference: loop)`. On a simulated loop the task prefers the loop from its
    /// start, so every job of it is a callback the simulation orders and traces.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func task<Success: Sendable>(
        priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable (isolated LoopIsolation) async throws -> Success
    ) -> Task<Success, any Error> {
        let isolation = self.isolation
        if isSimulated { return Task(executorPreference: self, priority: priority) { try await operation(isolation) } }
        return Task(priority: priority) { try await operation(isolation) }
    }

    /// Starts a task whose code is isolated to this loop (an operation that cannot throw); on a
    /// simulated loop it prefers the loop from its start, as the throwing form does.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func task<Success: Sendable>(
        priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable (isolated LoopIsolation) async -> Success
    ) -> Task<Success, Never> {
        let isolation = self.isolation
        if isSimulated { return Task(executorPreference: self, priority: priority) { await operation(isolation) } }
        return Task(priority: priority) { await operation(isolation) }
    }
}

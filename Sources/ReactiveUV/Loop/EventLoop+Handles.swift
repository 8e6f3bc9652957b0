internal import CLibUV

// Lending the `uv_loop_t` to C code, and listing open handles (ours and other code's).
extension EventLoop {
    /// Lends the underlying `uv_loop_t *` to libuv-based C code that must share this loop.
    ///
    /// Handles that code opens are its own: close them before the loop shuts down (shutdown
    /// closes any still open, without a close callback, and lists them in its report).
    ///
    /// Thread rule: loop thread only, or any thread once the loop has shut down; debug builds
    /// trap on any other call.
    public func withUnsafeUVLoop<R>(_ body: (UnsafeMutableRawPointer) throws -> R) rethrows -> R {
        assertInEventLoop()
        return try body(UnsafeMutableRawPointer(uvLoop))
    }

    /// Whether new handles may be opened (false once shutdown has closed them all). Loop thread only.
    @inline(__always)
    package var acceptsNewHandles: Bool { state.load(ordering: .relaxed).acceptsNewHandles }

    /// Whether new requests may start (false once shutdown began cancelling them). Loop thread only.
    var acceptsNewRequests: Bool { state.load(ordering: .relaxed).acceptsNewRequests }

    /// The handles open on this loop now (other code's too, with a nil `label`), not those closing
    /// or the loop's own.
    ///
    /// - Throws: `EventLoopError.shutDown` after shutdown; `.calledOnLoopThread` on another
    ///   loop's thread (use the async form there); `.notRunningOnOwnerThread` for an
    ///   owner-thread loop outside `run()`.
    ///
    /// Thread rule: safe from any thread (inline on this loop's thread; waits from a thread
    /// that is no loop's; throws on another loop's thread).
    public func openHandles() throws(EventLoopError) -> [OpenHandle] {
        try performAndWait(operation: "openHandles()") { $0.collectOpenHandles() }
    }

    /// The handles open on this loop now (see the blocking `openHandles()`), without blocking any thread.
    ///
    /// - Throws: `EventLoopError.shutDown` after shutdown, `.notRunningOnOwnerThread` for an
    ///   owner-thread loop outside `run()`.
    ///
    /// Thread rule: safe from any thread and any task.
    public func openHandles() async throws(EventLoopError) -> [OpenHandle] {
        try await perform(operation: "openHandles()") { $0.collectOpenHandles() }
    }

    func collectOpenHandles() -> [OpenHandle] {
        assertInEventLoop()
        var ours: [UnsafeMutableRawPointer: any LoopHandleOwner] = [:]
        for owner in openHandleList.owners { ours[UnsafeMutableRawPointer(owner.handle)] = owner }
        var walk = HandleWalk(loop: self, ours: ours)
        withUnsafeMutablePointer(to: &walk) { pointer in
            uv_walk(uvLoop, { handle, argument in
                guard let handle, let argument else { return }
                let walk = argument.assumingMemoryBound(to: HandleWalk.self)
                walk.pointee.visit(handle)
            }, pointer)
        }
        if virtualClock != nil {
            // A simulated stream has no libuv handle: the walk cannot see it, the list can.
            for (memory, owner) in ours where !walk.seen.contains(memory) {
                walk.found.append(OpenHandle(kind: owner.kind, label: owner.label, isActive: true, isReferenced: true))
            }
        }
        return walk.found + pendingTimerHandles()
    }

    func isInternal(_ handle: UnsafeMutablePointer<uv_handle_t>) -> Bool {
        let raw = UnsafeMutableRawPointer(handle)
        return raw == UnsafeMutableRawPointer(wakeup) || raw == UnsafeMutableRawPointer(idle)
            || raw == UnsafeMutableRawPointer(timerDriver) || raw == metricsProbe.map(UnsafeMutableRawPointer.init)
    }

    var timerDriverHandle: UnsafeMutablePointer<uv_timer_t> { timerDriver }

    /// Runs `body` on the loop thread and waits for its result (inline when already there).
    ///
    /// Never blocks a loop thread: on another loop's thread it throws (two loops asking each
    /// other would deadlock). Checking an owner-thread loop runs and submitting are one step.
    func performAndWait<T: Sendable>(operation: String, _ body: @escaping @Sendable (EventLoop) -> T) throws(EventLoopError) -> T {
        if inEventLoop { return body(self) }
        if let current = EventLoop.current {
            throw EventLoopError.calledOnLoopThread(operation: operation, loop: current.name)
        }
        // Between callbacks the thread driving a simulated loop is its thread: waiting would hang.
        if virtualClock != nil { return try performSimulatedNow(body) }
        let done = Latch()
        let result = LockedValue<T?>(nil)
        switch enqueueItem(.closure {
            let value = body(self)
            result.withLock { $0 = value }
            done.open()
        }, refusingIdle: true) {
        case .accepted: break
        case .closed: throw refusal
        case .idle: throw EventLoopError.notRunningOnOwnerThread(operation: operation, loop: name)
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// Runs `body` on the loop thread and resumes with its result, without blocking any thread.
    func perform<T: Sendable>(operation: String, _ body: @escaping @Sendable (EventLoop) -> T) async throws(EventLoopError) -> T {
        if inEventLoop { return body(self) }
        let outcome: Result<T, EventLoopError> = await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let submission = enqueueItem(.closure {
                once.resume(.success(body(self)))
            }, refusingIdle: true)
            switch submission {
            case .accepted: break
            case .closed: once.resume(.failure(refusal))
            case .idle: once.resume(.failure(.notRunningOnOwnerThread(operation: operation, loop: name)))
            }
        }
        return try outcome.get()
    }
}

/// Resumes a continuation exactly once (the work item and the refusal path may both hold it).
private final class ResumeOnce<T: Sendable>: @unchecked Sendable {
    // `continuation` is taken under `lock`; resumed after the lock is released.
    private let lock = SpinLock()
    @exclusivity(unchecked) private var continuation: CheckedContinuation<Result<T, EventLoopError>, Never>?

    init(_ continuation: CheckedContinuation<Result<T, EventLoopError>, Never>) { self.continuation = continuation }

    func resume(_ result: Result<T, EventLoopError>) {
        let taken: CheckedContinuation<Result<T, EventLoopError>, Never>? = lock.withLock {
            defer { continuation = nil }
            return continuation
        }
        taken?.resume(returning: result)
    }
}

private struct HandleWalk {
    unowned(unsafe) let loop: EventLoop
    let ours: [UnsafeMutableRawPointer: any LoopHandleOwner]
    var found: [OpenHandle] = []
    /// Our handles the walk met (the others of `ours` are simulated).
    var seen: Set<UnsafeMutableRawPointer> = []

    mutating func visit(_ handle: UnsafeMutablePointer<uv_handle_t>) {
        if loop.isInternal(handle) || uv_is_closing(handle) != 0 { return }
        let owner = ours[UnsafeMutableRawPointer(handle)]
        if owner != nil { seen.insert(UnsafeMutableRawPointer(handle)) }
        found.append(OpenHandle(
            kind: String(cString: uv_handle_type_name(handle.pointee.type)),
            label: owner?.label,
            isActive: uv_is_active(handle) != 0,
            isReferenced: uv_has_ref(handle) != 0))
    }
}

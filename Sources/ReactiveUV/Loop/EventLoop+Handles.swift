internal import CLibUV

// Handles on the loop: lending the `uv_loop_t` to C code, and the registry of open handles
// (our own in an intrusive list; other code's through `uv_walk`).
extension EventLoop {
    /// Lends the underlying `uv_loop_t *` to libuv-based C code that must share this loop.
    ///
    /// Handles that code opens are its own: close them before the loop shuts
    /// down (shutdown closes any still open, without a close callback, and
    /// lists them in its report).
    ///
    /// - Parameter body: Receives the `uv_loop_t *` as a raw pointer.
    /// - Returns: What `body` returns.
    ///
    /// Thread rule: loop thread only (libuv is not thread-safe).
    public func withUnsafeUVLoop<R>(_ body: (UnsafeMutableRawPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawPointer(uvLoop))
    }

    /// Links a newly opened handle into the list of open handles.
    func registerOpen(_ handle: LoopHandle) {
        handle.nextOpen = openHandlesHead
        handle.previousOpen = nil
        openHandlesHead?.previousOpen = handle
        openHandlesHead = handle
        openHandleCount += 1
    }

    /// Unlinks a handle that started closing.
    func unregisterOpen(_ handle: LoopHandle) {
        if let previous = handle.previousOpen {
            previous.nextOpen = handle.nextOpen
        } else {
            openHandlesHead = handle.nextOpen
        }
        handle.nextOpen?.previousOpen = handle.previousOpen
        handle.nextOpen = nil
        handle.previousOpen = nil
        openHandleCount -= 1
    }

    /// Whether new handles may be opened (false once shutdown has closed them all).
    var acceptsNewHandles: Bool { acceptsLocalWork }

    /// Whether new requests may start (false once shutdown began cancelling them).
    var acceptsNewRequests: Bool { !closingStarted }

    /// The handles open on this loop now, excluding the loop's own wake-up and idle handles.
    ///
    /// Includes handles opened by other code on this loop (their `label` is nil).
    /// Handles already closing are not listed.
    ///
    /// - Returns: One entry per open handle.
    /// - Throws: `EventLoopError.shutDown` after shutdown; `.calledOnLoopThread` never (it runs inline there).
    ///
    /// Thread rule: safe from any thread (from another thread it waits for the loop to answer).
    public func openHandles() throws(EventLoopError) -> [OpenHandle] {
        try performAndWait(operation: "openHandles()") { $0.collectOpenHandles() }
    }

    func collectOpenHandles() -> [OpenHandle] {
        var ours: [UnsafeMutableRawPointer: LoopHandle] = [:]
        var cursor = openHandlesHead
        while let handle = cursor {
            ours[handle.raw] = handle
            cursor = handle.nextOpen
        }
        var walk = HandleWalk(loop: self, ours: ours)
        withUnsafeMutablePointer(to: &walk) { pointer in
            uv_walk(uvLoop, { handle, argument in
                guard let handle, let argument else { return }
                let walk = argument.assumingMemoryBound(to: HandleWalk.self)
                walk.pointee.visit(handle)
            }, pointer)
        }
        return walk.found + pendingTimerHandles()
    }

    func isInternal(_ handle: UnsafeMutablePointer<uv_handle_t>) -> Bool {
        let raw = UnsafeMutableRawPointer(handle)
        return raw == UnsafeMutableRawPointer(wakeup) || raw == UnsafeMutableRawPointer(idle)
            || raw == UnsafeMutableRawPointer(timerDriver) || raw == metricsProbe.map(UnsafeMutableRawPointer.init)
    }

    /// The driver timer, for LoopTimers.swift.
    var timerDriverHandle: UnsafeMutablePointer<uv_timer_t> { timerDriver }

    /// Runs `body` on the loop thread and waits for its result (inline when already there).
    func performAndWait<T: Sendable>(operation: String, _ body: @escaping @Sendable (EventLoop) -> T) throws(EventLoopError) -> T {
        if inEventLoop { return body(self) }
        if !ownsThread && readPhase() == .idle {
            throw EventLoopError.notRunningOnOwnerThread(operation: operation, loop: name)
        }
        let done = Latch()
        let result = LockedValue<T?>(nil)
        try tryExecute {
            let value = body(self)
            result.withLock { $0 = value }
            done.open()
        }
        done.wait()
        return result.withLock { $0! }
    }
}

/// State for one `uv_walk` listing open handles.
private struct HandleWalk {
    unowned(unsafe) let loop: EventLoop
    let ours: [UnsafeMutableRawPointer: LoopHandle]
    var found: [OpenHandle] = []

    mutating func visit(_ handle: UnsafeMutablePointer<uv_handle_t>) {
        if loop.isInternal(handle) || uv_is_closing(handle) != 0 { return }
        let owner = ours[UnsafeMutableRawPointer(handle)]
        found.append(OpenHandle(
            kind: String(cString: uv_handle_type_name(handle.pointee.type)),
            label: owner?.label,
            isActive: uv_is_active(handle) != 0,
            isReferenced: uv_has_ref(handle) != 0))
    }
}

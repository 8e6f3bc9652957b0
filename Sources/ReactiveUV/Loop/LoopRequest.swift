internal import CLibUV

/// Owns the memory of one libuv request and keeps itself alive while libuv may touch it.
///
/// Requests (`uv_fs_t`, `uv_work_t`, `uv_getaddrinfo_t`, `uv_connect_t`,
/// `uv_write_t`, `uv_shutdown_t`, `uv_udp_send_t`) are not handles: `uv_walk`
/// does not see them, and `uv_loop_close` returns `EBUSY` while one is
/// pending. So each is tracked here, mirroring `LoopHandle`:
/// 1. `init` allocates `uv_req_size(type)` bytes (on any thread). A file-system request made on
///    its loop's thread takes the memory of one that ended there instead, if the loop kept one
///    (`EventLoop.spareFSRequests`), so a stat pays no malloc and free.
/// 2. On the loop thread the subclass calls `willStart()`, which stores
///    `Unmanaged.passRetained(self)` in `req.data` and links the request into
///    the loop's list of pending ones, then the `uv_*` function that starts it
///    (`req.data` must be set first: thread-pool work reads it on a pool
///    thread as soon as it is queued); if that call fails, `startFailed()`.
/// 3. The completion callback calls `didFinish()` first: it unlinks the
///    request and balances the retain. The memory stays with the object, so a
///    request can be started again (write requests are pooled); it is freed
///    in `deinit`, which can only run once libuv has called back.
///
/// Shutdown calls `cancelForShutdown()` on every pending request (before the
/// handles are closed), then keeps running the loop until each one has called
/// back; no request may start once shutdown began (`loop.acceptsNewRequests`).
///
/// Write requests are not linked into the list (`tracked: false`), which keeps two list updates
/// off every write: closing their stream's handle calls each back (`ECANCELED`) before its
/// close callback, so shutdown waits for them through the handle.
///
/// Thread rule: loop thread only, except `init`.
class LoopRequest {
    // Everything below is confined to `loop`'s thread once `willStart()` ran.

    /// The loop this request runs on (kept alive by the request).
    let loop: EventLoop
    /// The request memory; libuv points into it while the request is pending.
    let raw: UnsafeMutableRawPointer
    /// Whether the request is linked into `loop.requests` while pending (see above).
    let isTracked: Bool
    /// Whether libuv runs this kind of request on its thread pool (file, work and lookup requests), so
    /// `willStart()` notes a pool use (false for the pool's own start request).
    let usesPool: Bool
    /// A file-system request: its memory goes back to the loop's spares when freed on the loop thread.
    let isFileSystem: Bool
    /// Whether libuv owns the request now (started, not yet called back).
    @exclusivity(unchecked) private(set) final var isPending = false
    /// This request's place in the loop's list of pending requests (`loop.requests`), when tracked.
    @exclusivity(unchecked) final var listLinks = IntrusiveLinks<LoopRequest>()

    /// Allocates memory for a request of `type`; `tracked: false` only for requests on a stream handle (see above).
    /// `notingPoolUse: false` only for the request that starts the pool (`PoolStartRequest`).
    init(loop: EventLoop, type: uv_req_type, tracked: Bool = true, notingPoolUse: Bool = true) {
        switch type {
        case UV_FS, UV_WORK, UV_GETADDRINFO, UV_GETNAMEINFO, UV_RANDOM: self.usesPool = notingPoolUse
        default: self.usesPool = false
        }
        self.isTracked = tracked
        isFileSystem = type == UV_FS
        raw = isFileSystem ? Self.fileSystemMemory(on: loop) : LibUVMemory.allocate(uv_req_size(type))
        // Stored last: its last use, so the reference passed in is stored (no retain and release more).
        self.loop = loop
    }

    /// `init(loop:type: UV_FS)` with what the type decides written in, so a stat runs no switch over
    /// the type (and the general one stays out of line, off a stream's send).
    init(fileSystemOn loop: EventLoop) {
        usesPool = true
        isTracked = true
        isFileSystem = true
        raw = Self.fileSystemMemory(on: loop)
        // Stored last, as above.
        self.loop = loop
    }

    /// Memory for a `uv_fs_t`: a spare block of `loop`'s when made on its thread, else `malloc`'s.
    @inline(__always)
    private static func fileSystemMemory(on loop: EventLoop) -> UnsafeMutableRawPointer {
        if loop.inEventLoop, let spare = loop.takeSpareFSRequest() { return spare }
        return LibUVMemory.allocate(uv_req_size(UV_FS))
    }

    deinit {
        assert(!isPending, "a \(label) request was released while libuv still owned it")
        // On the loop thread only: the spares are the loop thread's (a request can be freed on any thread).
        if !(isFileSystem && loop.inEventLoop && loop.keepSpareFSRequest(raw)) {
            LibUVMemory.free(raw)
        }
    }

    /// The request as libuv's base type.
    final var request: UnsafeMutablePointer<uv_req_t> {
        raw.assumingMemoryBound(to: uv_req_t.self)
    }

    /// The request as a concrete libuv type.
    final func pointer<T>(as type: T.Type) -> UnsafeMutablePointer<T> {
        raw.assumingMemoryBound(to: T.self)
    }

    /// What this request is doing, for messages ("getaddrinfo example.com").
    var label: String { "request" }

    /// Marks the request as about to start: retains self in `req.data` and registers it with the loop.
    ///
    /// Call right before the `uv_*` call that starts it; call `startFailed()` if that call fails.
    /// With `handingOver`, no retain is taken: the caller hands libuv a reference it owns and
    /// has set aside (a pooled write request's), and whoever handles the callback takes it over.
    final func willStart(handingOver: Bool = false) {
        assertInEventLoop()
        assert(!isPending, "willStart() called on a pending request")
        // libuv's pool starts (and fixes its size) at the first request that runs on it.
        if usesPool { PoolUse.noteUse(on: loop) }
        request.pointee.data = handingOver ? Unmanaged.passUnretained(self).toOpaque() : Unmanaged.passRetained(self).toOpaque()
        isPending = true
        if isTracked { loop.requests.insert(self) }
    }

    /// Undoes `willStart()` after the `uv_*` call refused to start the request (libuv will not call back).
    ///
    /// With `handingOver` the reference stays the caller's (nothing is released).
    final func startFailed(handingOver: Bool = false) {
        assertInEventLoop()
        guard isPending, let data = request.pointee.data else { return }
        isPending = false
        request.pointee.data = nil
        if isTracked { loop.requests.remove(self) }
        if !handingOver { Unmanaged<LoopRequest>.fromOpaque(data).release() }
    }

    /// Starts the request with `start` (a `uv_*` call returning libuv's result) between `willStart()` and `startFailed()`.
    ///
    /// - Throws: `UVError` with `context` when libuv refused.
    final func start(_ context: @autoclosure () -> String, _ start: () -> Int32) throws(UVError) {
        willStart()
        let result = start()
        if result < 0 {
            startFailed()
            throw UVError(code: result, context: context())
        }
    }

    /// Marks the request finished: unregisters it and clears `req.data`.
    ///
    /// Call first in the completion callback, which balances the retain of
    /// `willStart()` by taking the object with `takeRetainedValue()` (or takes
    /// over the reference handed over).
    final func didFinish() {
        assertInEventLoop()
        assert(isPending, "didFinish() called on a request that is not pending")
        isPending = false
        request.pointee.data = nil
        if isTracked { loop.requests.remove(self) }
    }

    /// Called by the loop's shutdown for a pending request.
    ///
    /// The default asks libuv to cancel it (`uv_cancel` works for fs, work and
    /// getaddrinfo requests that have not started; the callback then reports
    /// `ECANCELED`). Connect, write and shutdown requests end when their handle
    /// closes, so they need nothing. Requests behind a signal override it to
    /// tell their subscriber the loop went away.
    func cancelForShutdown() {
        cancel()
    }

    /// Asks libuv to cancel the request if it has not started running yet.
    ///
    /// - Returns: Whether libuv cancelled it (the callback will report `ECANCELED`).
    @discardableResult
    final func cancel() -> Bool {
        assertInEventLoop()
        guard isPending else { return false }
        switch request.pointee.type {
        case UV_FS, UV_WORK, UV_GETADDRINFO, UV_GETNAMEINFO, UV_RANDOM:
            // EBUSY means it is running on the thread pool already: it will call back soon.
            return uv_cancel(request) == 0
        default:
            return false
        }
    }
}

extension EventLoop {
    /// How many spare file-system request blocks a loop keeps (as many as 32 stats in flight reuse).
    private static var spareFSRequestLimit: Int { 32 }

    /// A kept block of `uv_fs_t` memory, if any. Loop thread only.
    func takeSpareFSRequest() -> UnsafeMutableRawPointer? {
        guard let block = spareFSRequests else { return nil }
        spareFSRequests = block.load(as: UnsafeMutableRawPointer?.self)
        spareFSRequestCount -= 1
        return block
    }

    /// Keeps the `uv_fs_t` memory `block` for a later request; false when the loop keeps enough (free it then).
    /// Loop thread only, for a request libuv is done with.
    func keepSpareFSRequest(_ block: UnsafeMutableRawPointer) -> Bool {
        guard spareFSRequestCount < Self.spareFSRequestLimit else { return false }
        // The memory holds a C struct (trivial), so its first word may be overwritten in place.
        block.storeBytes(of: spareFSRequests, as: UnsafeMutableRawPointer?.self)
        spareFSRequests = block
        spareFSRequestCount += 1
        return true
    }
}

extension IntrusiveList where Membership == LoopRequestList {
    /// Calls `cancelForShutdown()` on every pending request.
    ///
    /// The list is copied first (with strong references) because cancelling
    /// can notify subscribers whose reactions finish other requests.
    func cancelAllForShutdown() {
        for request in Array(self) where request.isPending {
            request.cancelForShutdown()
        }
    }
}

/// The loop's list of pending requests (`EventLoop.requests`), through `LoopRequest.listLinks`.
enum LoopRequestList: IntrusiveListMembership {
    static func withLinks<Result>(of element: LoopRequest, _ body: (inout IntrusiveLinks<LoopRequest>) -> Result) -> Result {
        body(&element.listLinks)
    }
}

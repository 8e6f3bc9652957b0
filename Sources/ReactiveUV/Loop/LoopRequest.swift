internal import CLibUV

/// Owns the memory of one libuv request and keeps itself alive while libuv may touch it.
///
/// Requests are not handles: `uv_walk` misses them and `uv_loop_close` fails with `EBUSY` while
/// one is pending, so each is tracked here, mirroring `LoopHandle`:
/// 1. `init` allocates the memory (any thread; a file-system request on its loop's thread reuses
///    a spare block of the loop's).
/// 2. On the loop thread the subclass calls `willStart()` (retains self in `req.data`, which
///    pool work reads as soon as queued, and links the request), then the `uv_*` call; if that
///    fails, `startFailed()`.
/// 3. The completion callback calls `didFinish()` first. The memory stays with the object (write
///    requests are pooled) and is freed in `deinit`, which runs only once libuv called back.
///
/// Shutdown cancels every pending request before closing handles and runs the loop until each
/// called back; none may start after (`loop.acceptsNewRequests`). Write requests are untracked:
/// closing their stream calls each back (`ECANCELED`) before its close callback.
/// Thread rule: loop thread only, except `init`.
class LoopRequest {
    // Confined to `loop`'s thread once `willStart()` ran.

    /// The loop this request runs on (kept alive by the request).
    let loop: EventLoop
    /// The request memory; libuv points into it while the request is pending.
    let raw: UnsafeMutableRawPointer
    /// Whether the request is linked into `loop.requests` while pending.
    let isTracked: Bool
    /// Whether libuv runs this kind on its thread pool, so `willStart()` notes a pool use.
    let usesPool: Bool
    /// Whether its memory goes back to the loop's spares when freed on the loop thread.
    let isFileSystem: Bool
    /// Whether libuv owns the request now (started, not yet called back).
    @exclusivity(unchecked) private(set) final var isPending = false
    /// This request's place in `loop.requests`, when tracked.
    @exclusivity(unchecked) final var listLinks = IntrusiveLinks<LoopRequest>()

    /// `tracked: false` only for requests on a stream handle; `notingPoolUse: false` only for `PoolStartRequest`.
    init(loop: EventLoop, type: uv_req_type, tracked: Bool = true, notingPoolUse: Bool = true) {
        switch type {
        case UV_FS, UV_WORK, UV_GETADDRINFO, UV_GETNAMEINFO, UV_RANDOM: self.usesPool = notingPoolUse
        default: self.usesPool = false
        }
        self.isTracked = tracked
        isFileSystem = type == UV_FS
        raw = isFileSystem ? Self.fileSystemMemory(on: loop) : LibUVMemory.allocate(uv_req_size(type))
        // Stored last, at its last use, so the reference passed in is stored without another retain.
        self.loop = loop
    }

    /// `init(loop:type: UV_FS)` with the type's answers written in, keeping the general one off a stream's send.
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
        // Only on the loop thread, whose spares they are (a request can be freed on any thread).
        if !(isFileSystem && loop.inEventLoop && loop.keepSpareFSRequest(raw)) {
            LibUVMemory.free(raw)
        }
    }

    final var request: UnsafeMutablePointer<uv_req_t> {
        raw.assumingMemoryBound(to: uv_req_t.self)
    }

    final func pointer<T>(as type: T.Type) -> UnsafeMutablePointer<T> {
        raw.assumingMemoryBound(to: T.self)
    }

    /// What this request is doing, for messages ("getaddrinfo example.com").
    var label: String { "request" }

    /// Retains self in `req.data` and registers the request with the loop; call right before the
    /// `uv_*` call, and `startFailed()` if it fails.
    ///
    /// With `handingOver`, no retain is taken: the caller hands libuv a reference it owns (a pooled
    /// write request's) and the callback takes it over.
    final func willStart(handingOver: Bool = false) {
        assertInEventLoop()
        assert(!isPending, "willStart() called on a pending request")
        // libuv's pool starts (and fixes its size) at the first request that runs on it.
        if usesPool { PoolUse.noteUse(on: loop) }
        request.pointee.data = handingOver ? Unmanaged.passUnretained(self).toOpaque() : Unmanaged.passRetained(self).toOpaque()
        isPending = true
        if isTracked { loop.requests.insert(self) }
    }

    /// Undoes `willStart()` after the `uv_*` call refused (libuv will not call back); with
    /// `handingOver` nothing is released.
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

    /// Unregisters the request and clears `req.data`. Call first in the completion callback, which
    /// takes the `willStart()` retain (or the reference handed over).
    final func didFinish() {
        assertInEventLoop()
        assert(isPending, "didFinish() called on a request that is not pending")
        isPending = false
        request.pointee.data = nil
        if isTracked { loop.requests.remove(self) }
    }

    /// Called by shutdown for a pending request: the default cancels it if it has not started
    /// (callback with `ECANCELED`); connect, write and shutdown requests end with their handle.
    /// Requests behind a signal override it to tell their subscriber the loop went away.
    func cancelForShutdown() {
        cancel()
    }

    /// Cancels the request if it has not started running; returns whether libuv cancelled it.
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
    /// How many spare file-system request blocks a loop keeps.
    private static var spareFSRequestLimit: Int { 32 }

    /// A kept block of `uv_fs_t` memory, if any. Loop thread only.
    func takeSpareFSRequest() -> UnsafeMutableRawPointer? {
        guard let block = spareFSRequests else { return nil }
        spareFSRequests = block.load(as: UnsafeMutableRawPointer?.self)
        spareFSRequestCount -= 1
        return block
    }

    /// Keeps `uv_fs_t` memory libuv is done with for a later request; false when the loop keeps
    /// enough (free it then). Loop thread only.
    func keepSpareFSRequest(_ block: UnsafeMutableRawPointer) -> Bool {
        guard spareFSRequestCount < Self.spareFSRequestLimit else { return false }
        // A trivial C struct: its first word may be overwritten in place.
        block.storeBytes(of: spareFSRequests, as: UnsafeMutableRawPointer?.self)
        spareFSRequests = block
        spareFSRequestCount += 1
        return true
    }
}

extension IntrusiveList where Membership == LoopRequestList {
    /// Calls `cancelForShutdown()` on every pending request, from a copy: cancelling can notify
    /// subscribers whose reactions finish other requests.
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

internal import CLibUV

/// The stream core's one seam to its backend: every call `StreamConnection` makes of its
/// transport goes through here, to libuv (`UVStream`, the handle memory) or, for a stream a
/// simulation opened, to its `SimulatedStreamEnd`. The choice is the stream's `simulated` bit,
/// set once when it opens: one predictable branch per call, no per-call lookup.
///
/// A view made where it is used; it stores nothing but the stream.
///
/// Thread rule: loop thread only (the stream's).
struct StreamIO {
    unowned(unsafe) let connection: StreamConnection

    @inline(__always)
    private var uv: UVStream { UVStream(connection.handleCell.handle) }

    @inline(__always)
    private var isSimulated: Bool { connection.bits.simulated }

    /// The simulated end, which the extras hold from the stream's opening to its close callback.
    private var simulated: SimulatedStreamEnd {
        guard let end = connection.extrasIfMade?.simulated else {
            preconditionFailure("a simulated stream without its simulated end")
        }
        return end
    }

    /// See `UVStream.initialize` (real streams only: a simulated one opens with `openSimulated`).
    func initialize(_ transport: StreamConnection.Transport, ipc: Bool, descriptor: Int32?, on loop: EventLoop) throws(UVError) {
        try uv.initialize(transport, ipc: ipc, descriptor: descriptor, on: loop)
    }

    /// See `UVStream.adopt` (real streams only).
    func adopt(_ descriptor: Int32, _ transport: StreamConnection.Transport) throws(UVError) {
        try uv.adopt(descriptor, transport)
    }

    /// Starts reading; the backend calls `readBuffer()` and `didRead(_:at:)` back (in the TLS lane,
    /// `tlsDidRead(_:in:)`: a simulated end asks the stream's `tls` bit itself).
    func startReading(ipc: Bool, tls: Bool = false) -> UVError? {
        if isSimulated { return simulated.startReading() }
        return uv.startReading(ipc: ipc, tls: tls)
    }

    func stopReading() {
        if isSimulated { simulated.stopReading() } else { uv.stopReading() }
    }

    /// Bytes the backend holds in its write queue.
    var queuedByteCount: Int {
        // Asked on every send: the simulated lane borrows the extras instead of retaining them.
        isSimulated ? connection.extrasSlot.withLoaded { $0.simulated?.backlogBytes ?? 0 } ?? 0 : uv.queuedByteCount
    }

    /// Writes what the kernel takes now: the count, `UV_EAGAIN`, or the error. Never asked of a
    /// simulated stream (`StreamStateBits.mayTryWrite` keeps its sends on `write`), so the echo
    /// path pays no test of the backend here.
    @inline(__always)
    func tryWrite(_ bytes: [UInt8]) -> Int32 {
        assert(!isSimulated, "a simulated stream writes through requests")
        return uv.tryWrite(bytes)
    }

    /// Queues `bytes[written...]` on `request`; `writeDidFinish` reports it.
    func write(_ bytes: [UInt8], skipping written: Int = 0, with request: WriteRequest) -> Int32 {
        if isSimulated { return simulated.write(bytes, skipping: written, with: request) }
        return uv.write(bytes, skipping: written, with: request)
    }

    /// EOF after the queued writes; `shutdownDidFinish` reports it.
    func shutdown(_ request: ShutdownRequest) throws(UVError) {
        if isSimulated { return try simulated.shutdown(request) }
        try uv.shutdown(request)
    }

    /// Makes the coming close send RST instead of FIN.
    func lingerForReset() {
        if isSimulated { simulated.resetOnClose() } else { uv.lingerForReset() }
    }

    /// The descriptor under the stream, or nil (a simulated stream has none: sending a file to it
    /// fails with `EBADF` until the simulated file system can feed it).
    var descriptor: Int32? { isSimulated ? nil : uv.descriptor }

    /// Bytes that arrived and are not read yet, or nil when the backend cannot say.
    var unreadByteCount: Int32? {
        isSimulated ? simulated.unreadByteCount : uv.unreadByteCount
    }
}

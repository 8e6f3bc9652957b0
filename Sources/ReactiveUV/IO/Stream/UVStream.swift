internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The stream family's libuv backend: every call a byte stream makes of libuv, and libuv's
/// callbacks into the stream.
///
/// The stream core (`StreamConnection`) asks only these members (through `StreamIO`, the seam,
/// which sends a simulated stream's calls to its `SimulatedStreamEnd` instead), and hears back only
/// through `readBuffer()`, `didRead(_:at:)`, `writeDidFinish(_:status:)` and
/// `shutdownDidFinish(_:status:)`, with libuv's status codes (`UV_EOF`, `UV_ECANCELED`), as the
/// simulated backend does too. Descriptor passing over an
/// IPC pipe (`StreamDescriptorPassing.swift`) and TCP's socket options are their families' own.
///
/// A view of the connection's handle memory: it stores nothing and is made where it is used.
///
/// Thread rule: loop thread only (the stream's).
struct UVStream {
    let stream: UnsafeMutablePointer<uv_stream_t>

    init(_ handle: UnsafeMutablePointer<uv_handle_t>) {
        stream = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    /// The handle memory a stream over `transport` needs.
    static func byteCount(for transport: StreamConnection.Transport) -> Int {
        switch transport {
        case .tcp: uv_handle_size(UV_TCP)
        case .pipe, .childPipe, .fifo: uv_handle_size(UV_NAMED_PIPE)
        case .tty: uv_handle_size(UV_TTY)
        }
    }

    /// `uv_tcp_init`, `uv_pipe_init` (`ipc`: one that passes descriptors), or `uv_tty_init` on
    /// `descriptor` (a terminal is opened on its descriptor from the start).
    func initialize(_ transport: StreamConnection.Transport, ipc: Bool, descriptor: Int32?, on loop: EventLoop) throws(UVError) {
        try loop.refuseIfSimulated("Stream", what: "a \(transport.connectionTypeName)")
        let raw = UnsafeMutableRawPointer(stream)
        switch transport {
        case .tcp:
            try uvCheck(uv_tcp_init(loop.uvLoop, raw.assumingMemoryBound(to: uv_tcp_t.self)), "uv_tcp_init")
        case .pipe, .childPipe, .fifo:
            try uvCheck(uv_pipe_init(loop.uvLoop, raw.assumingMemoryBound(to: uv_pipe_t.self), ipc ? 1 : 0), "uv_pipe_init")
        case .tty:
            guard let descriptor else {
                throw UVError(code: UVError.invalidArgumentCode, message: "a terminal is opened on a descriptor", context: "uv_tty_init")
            }
            try uvCheck(uv_tty_init(loop.uvLoop, raw.assumingMemoryBound(to: uv_tty_t.self), descriptor, 0), "uv_tty_init(\(descriptor))")
        }
    }

    /// Puts an open descriptor under the initialized handle (`uv_tcp_open`, `uv_pipe_open`; a
    /// terminal has it already). The handle owns it from here on.
    func adopt(_ descriptor: Int32, _ transport: StreamConnection.Transport) throws(UVError) {
        let raw = UnsafeMutableRawPointer(stream)
        switch transport {
        case .tcp:
            try uvCheck(uv_tcp_open(raw.assumingMemoryBound(to: uv_tcp_t.self), uv_os_sock_t(descriptor)), "uv_tcp_open(\(descriptor))")
        case .pipe, .childPipe, .fifo:
            try uvCheck(uv_pipe_open(raw.assumingMemoryBound(to: uv_pipe_t.self), descriptor), "uv_pipe_open(\(descriptor))")
        case .tty:
            break
        }
    }

    /// Starts reading: libuv asks the stream for a buffer, then hands it what it read.
    /// On an IPC pipe each buffer is first cut to what a peek saw (`peekBeforeIPCRead`); in the TLS
    /// lane what was read is ciphertext, handed to `tlsDidRead` instead of `didRead`.
    func startReading(ipc: Bool, tls: Bool = false) -> UVError? {
        do {
            try uvCheck(uv_read_start(stream, ipc ? ipcStreamAllocate : streamAllocate, tls ? tlsReadCallback : streamReadCallback), "uv_read_start")
        } catch {
            return error
        }
        return nil
    }

    func stopReading() {
        uvCheckReporting(uv_read_stop(stream), "uv_read_stop")
    }

    /// Bytes libuv holds in its write queue (not yet taken by the kernel).
    var queuedByteCount: Int { Int(uv_stream_get_write_queue_size(stream)) }

    /// Writes what the kernel takes now, when nothing is queued: the count taken, `UV_EAGAIN`
    /// when it took nothing, or the socket's error.
    func tryWrite(_ bytes: [UInt8]) -> Int32 {
        // `bytes` is not empty; libuv's length is a size_t.
        bytes.withUnsafeBufferPointer { buffer -> Int32 in
            var slice = uv_buf_t(base: UnsafeMutableRawPointer(mutating: buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                                 len: buffer.count)
            return uv_try_write(stream, &slice, 1)
        }
    }

    /// Queues `bytes[written...]` on `request`, whose reference (owned by the caller) libuv holds
    /// until `writeDidFinish`. libuv's refusal (negative) leaves nothing pending.
    func write(_ bytes: [UInt8], skipping written: Int = 0, with request: WriteRequest) -> Int32 {
        request.payload = bytes
        let base = bytes.withUnsafeBufferPointer { UnsafeMutableRawPointer(mutating: $0.baseAddress!) }
        // libuv copies the uv_buf_t itself into the request; only the bytes must stay put.
        var buffer = uv_buf_t(base: (base + written).assumingMemoryBound(to: CChar.self), len: bytes.count - written)
        request.willStart(handingOver: true)
        let result = uv_write(request.pointer(as: uv_write_t.self), stream, &buffer, 1, streamWriteCallback)
        if result < 0 {
            request.startFailed(handingOver: true)
            request.payload = []
        }
        return result
    }

    /// Sends EOF once the queued writes are flushed; `shutdownDidFinish` reports it.
    func shutdown(_ request: ShutdownRequest) throws(UVError) {
        let shutdown = request.pointer(as: uv_shutdown_t.self)
        try request.start("uv_shutdown") { uv_shutdown(shutdown, stream, shutdownRequestCallback) }
    }

    /// The stream's descriptor, or nil once libuv has none.
    var descriptor: Int32? {
        var descriptor = uv_os_fd_t()
        let handle = UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_handle_t.self)
        return uv_fileno(handle, &descriptor) == 0 ? descriptor : nil
    }

    /// Makes the close about to come abortive (RST, unsent data dropped): `SO_LINGER` on with 0 seconds.
    func lingerForReset() {
        guard let descriptor else { return }
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Bytes that reached the socket and are not read yet (`FIONREAD`), or nil when it cannot say.
    var unreadByteCount: Int32? {
        var unread: Int32 = 0
        guard let descriptor, withUnsafeMutablePointer(to: &unread, { ioctl(descriptor, UInt(FIONREAD), $0) }) == 0 else { return nil }
        return unread
    }
}

/// libuv's end-of-file status (`nread` of a read callback).
let endOfFileCode = Int(UV_EOF.rawValue)

// The callbacks borrow the stream without a retain: `handle.data` holds the one `didOpen()` took
// until the close callback, which libuv runs after every read and write callback of the handle.
private let streamAllocate: uv_alloc_cb = { handle, _, buffer in
    guard let data = handle?.pointee.data, let buffer else { return }
    Unmanaged<StreamConnection>.fromOpaque(data)._withUnsafeGuaranteedRef { stream in
        let (base, count) = stream.readBuffer()
        buffer.pointee = uv_buf_t(base: base.assumingMemoryBound(to: CChar.self), len: count)
    }
}

private let ipcStreamAllocate: uv_alloc_cb = { handle, _, buffer in
    guard let data = handle?.pointee.data, let buffer else { return }
    Unmanaged<StreamConnection>.fromOpaque(data)._withUnsafeGuaranteedRef { stream in
        let (base, count) = stream.readBuffer()
        buffer.pointee = uv_buf_t(base: base.assumingMemoryBound(to: CChar.self), len: count)
        stream.peekBeforeIPCRead(buffer)
    }
}

private let streamReadCallback: uv_read_cb = { stream, count, buffer in
    guard let data = stream?.pointee.data else { return }
    Unmanaged<StreamConnection>.fromOpaque(data)._withUnsafeGuaranteedRef { $0.didRead(count, at: buffer?.pointee.base) }
}

// Hands over the buffer itself, not its base: a body shaped like `streamReadCallback`'s would be
// merged with it by the optimizer, and the plain lane would pay a switch on every read.
private let tlsReadCallback: uv_read_cb = { stream, count, buffer in
    guard let data = stream?.pointee.data else { return }
    Unmanaged<StreamConnection>.fromOpaque(data)._withUnsafeGuaranteedRef { $0.tlsDidRead(count, in: buffer) }
}

private let streamWriteCallback: uv_write_cb = { request, status in
    guard let request, let data = request.pointee.data, let streamData = request.pointee.handle?.pointee.data else { return }
    // The reference the stream handed over when it started the write (see `StreamConnection.keepForReuse`).
    let write = Unmanaged<WriteRequest>.fromOpaque(data)
    write._withUnsafeGuaranteedRef { $0.didFinish() }
    Unmanaged<StreamConnection>.fromOpaque(streamData)._withUnsafeGuaranteedRef { $0.writeDidFinish(write, status: status) }
}

private let shutdownRequestCallback: uv_shutdown_cb = { request, status in
    guard let data = request?.pointee.data else { return }
    let request = Unmanaged<ShutdownRequest>.fromOpaque(data).takeRetainedValue()
    request.didFinish()
    request.owner.shutdownDidFinish(request, status: status)
}

/// One `uv_write_t`, reused: a stream keeps finished ones in a small pool (`keepForReuse`), so a
/// steady stream of writes allocates nothing but the payloads it is given.
///
/// The payload array is held until libuv calls back, and libuv reads straight from its storage:
/// a native array's elements stay put while it is alive and not mutated, and this one never is.
///
/// Thread rule: loop thread only.
final class WriteRequest: LoopRequest {
    @exclusivity(unchecked) var payload: [UInt8] = []
    /// Who waits for the result (`write(_:)`, `send(_:completion:)`); nil for `send(_:)`.
    @exclusivity(unchecked) var completion: (((any Error)?) -> Void)?
    /// A coalesced request's waiters, in the order of their writes (`StreamCore+Coalescing.swift`).
    @exclusivity(unchecked) var batchCompletions: [WriteCompletion] = []
    /// What the request counts in its stream's queue cost (`StreamConnection.perWriteOverhead` per write it carries).
    @exclusivity(unchecked) var cost = 0

    init(loop: EventLoop) {
        // Not in the loop's request list: closing the stream calls it back (see `LoopRequest`).
        super.init(loop: loop, type: UV_WRITE, tracked: false)
    }

    override var label: String { "write of \(payload.count) bytes" }

    /// Forgets the payload and the completions, for reuse.
    func reset() {
        payload = []
        completion = nil
        batchCompletions = []
    }

    /// Forgets the payload and hands the completion over (moved, not copied), for reuse.
    func takeCompletion() -> (((any Error)?) -> Void)? {
        payload = []
        var taken: (((any Error)?) -> Void)? = nil
        swap(&taken, &completion)
        return taken
    }

    /// Hands a coalesced request's completions over (moved), leaving none.
    func takeBatchCompletions() -> [WriteCompletion] {
        var taken: [WriteCompletion] = []
        swap(&taken, &batchCompletions)
        return taken
    }
}

/// One `uv_shutdown_t`: EOF once the queued writes are flushed.
///
/// Thread rule: loop thread only.
final class ShutdownRequest: LoopRequest {
    // The stream outlives its pending request: closing it calls the request back first.
    unowned(unsafe) let owner: StreamConnection
    let outcome: WriteOutcome?

    init(loop: EventLoop, owner: StreamConnection, outcome: WriteOutcome?) {
        self.owner = owner
        self.outcome = outcome
        super.init(loop: loop, type: UV_SHUTDOWN)
    }

    override var label: String { "shutdown" }
}

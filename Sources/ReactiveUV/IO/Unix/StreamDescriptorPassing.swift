internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Takes the descriptors an IPC pipe receives (`UnixConnection.incoming`'s subscription).
protocol StreamDescriptorReceiver: AnyObject {
    /// A passed socket was accepted into `stream` (open, on the channel's loop, owned by nobody yet). Loop thread.
    func channel(_ channel: StreamConnection, didReceive stream: StreamConnection)
    /// A passed descriptor could not be taken (it was closed): the receiver ends with `error`. Loop thread.
    func channel(_ channel: StreamConnection, failedToReceive error: UVError)
    /// Set before a read whose message carries descriptors the kernel will close (more than libuv
    /// takes, or more than this process has room for): reported once that read was delivered. Loop thread.
    var truncation: UVError? { get set }
}

/// Descriptor passing over an IPC pipe (`uv_pipe_init` with `ipc` 1): `uv_write2` on the sending
/// side, `uv_pipe_pending_count` / `uv_pipe_pending_type` / `uv_accept` on the receiving side.
///
/// Receiving: libuv collects the descriptors that come with a read (`SCM_RIGHTS`)
/// in the pipe's queue and then calls the read callback; `didReadOnIPCPipe`
/// (called there, after the chunk was delivered) accepts each into a new
/// `uv_tcp_t` or `uv_pipe_t` on this loop and hands it to `descriptorReceiver`.
/// Descriptors are accepted only while libuv reads for a reader: `uv_accept`
/// re-arms the pipe's `POLLIN`, which would spin on a pipe that stopped
/// reading. Those left in the queue (the reader stopped during a delivery)
/// wait for the next reader, and libuv closes them when the pipe closes.
extension StreamConnection {
    // MARK: - receiving

    /// The most descriptors libuv 1.44 takes from one message (its read's control buffer); the
    /// kernel closes any beyond, and sets `MSG_CTRUNC`, which libuv does not look at.
    static let descriptorsPerMessage = 64

    /// Before a read on an IPC pipe with a descriptor receiver: peeks at what the read will take,
    /// and notes for the receiver a message whose descriptors the kernel will close.
    ///
    /// The read is then given exactly the bytes the peek saw (`buffer`'s length cut to them), so it
    /// takes the same messages: data arriving in between waits for the next read and its own peek.
    /// When nothing is there the length is 0, and libuv reports `UV_ENOBUFS` without reading
    /// (`didRead` ignores it on an IPC pipe; libuv keeps polling). The cost, on IPC pipes read by
    /// `incoming` only: a peek per read, and a copy of each passed descriptor, closed at once.
    func peekBeforeIPCRead(_ buffer: UnsafeMutablePointer<uv_buf_t>) {
        guard let receiver = descriptorReceiver else { return }
        var socket = uv_os_fd_t()
        guard uv_fileno(handle, &socket) == 0 else { return }
        var descriptors: Int32 = 0
        var outOfRoom: Int32 = 0
        let peeked = ruv_peek_passed_descriptors(socket, buffer.pointee.base, buffer.pointee.len, &descriptors, &outOfRoom)
        if peeked == -Int(EAGAIN) {
            buffer.pointee.len = 0
            return
        }
        // End of file or an error: the read reports it.
        guard peeked > 0 else { return }
        buffer.pointee.len = Int(peeked)
        let context = "UnixConnection.incoming of \(peerDescription)"
        if descriptors > Int32(Self.descriptorsPerMessage) {
            let count = outOfRoom != 0 ? "at least \(descriptors)" : "\(descriptors)"
            receiver.truncation = UVError(
                code: UV_EMSGSIZE.rawValue,
                message: "the peer passed \(count) descriptors in one message; a read takes at most \(Self.descriptorsPerMessage) (libuv's limit), and the kernel closed the rest: send at most \(Self.descriptorsPerMessage) per message",
                context: context)
        } else if outOfRoom != 0 {
            receiver.truncation = UVError(
                code: UV_EMFILE.rawValue,
                message: "the peer passed more descriptors in one message than this process had room for (it took \(descriptors)); the kernel closed the rest",
                context: context)
        }
    }

    /// After a read on an IPC pipe: hands over what came with it (the chunk was delivered first),
    /// then reports descriptors the kernel closed from that read's message.
    func didReadOnIPCPipe() {
        deliverPendingDescriptors()
        if let receiver = descriptorReceiver, let truncation = receiver.truncation {
            receiver.truncation = nil
            receiver.channel(self, failedToReceive: truncation)
        }
    }

    /// Reading (re)started on an IPC pipe: descriptors left queued by an earlier reader are handed
    /// over from the loop's queue (not now: the reader's subscription is still being set up).
    func descriptorsMayBePending() {
        if bits.simulated {
            if extrasIfMade?.simulated?.passedIn.isEmpty == false { _ = loop.enqueue { [self] in deliverSimulatedDescriptors() } }
            return
        }
        guard uv_pipe_pending_count(pointer(as: uv_pipe_t.self)) > 0 else { return }
        _ = loop.enqueue { [self] in deliverPendingDescriptors() }
    }

    /// Accepts every queued descriptor while a reader reads, and hands each to the receiver.
    private func deliverPendingDescriptors() {
        if bits.simulated { return deliverSimulatedDescriptors() }
        let pipe = pointer(as: uv_pipe_t.self)
        while isHandleOpen, isReading, uv_pipe_pending_count(pipe) > 0 {
            guard let receiver = descriptorReceiver else {
                // A `bytes` reader: it cannot take a connection, and dropping one would be silent.
                endReader(UVError(code: UV_EPROTO.rawValue,
                                  message: "the peer passed a descriptor, which `bytes` cannot deliver: read an IPC connection with `incoming` (the descriptor stays queued for it)",
                                  context: "UnixConnection.bytes of \(peerDescription)"))
                return
            }
            let kind = uv_pipe_pending_type(pipe)
            // The connection the receiver hands out, made as its own class (a Unix socket's path is read once it is accepted).
            let origin = StreamOrigin("passed over the IPC connection \(peerDescription)", limits: limits)
            let accepted: StreamConnection = kind == UV_TCP
                ? TCPConnection(loop: loop, transport: .tcp, limits: limits, originLabel: origin)
                : UnixConnection(loop: loop, limits: limits, originLabel: origin, ipc: false, path: "")
            accepted.peerDescription = "a \(kind == UV_TCP ? "TCP" : "Unix") socket passed over \(peerDescription)"
            do {
                try accepted.open()
                // On failure libuv has closed the descriptor itself and moved on to the next one.
                try uvCheck(uv_accept(uvStream, accepted.uvStream), "uv_accept of a passed descriptor on \(peerDescription)")
            } catch {
                accepted.end(.closed)
                receiver.channel(self, failedToReceive: error)
                continue
            }
            // libuv calls a pipe's end (a FIFO) a named pipe too: only a Unix stream socket is one here.
            // A listening socket is a stream socket too, but a connection made of it would never
            // read a byte nor end (its clients would wait in its backlog unseen).
            guard kind == UV_TCP || (kind == UV_NAMED_PIPE && accepted.isUnixStreamSocket), !accepted.isListeningSocket else {
                // Accepted into a pipe handle only to close it: a UDP socket, a file, a pipe's end, a server's socket.
                let what = accepted.passedDescriptorKind
                accepted.end(.closed)
                receiver.channel(self, failedToReceive: UVError(
                    code: UV_ENOTSUP.rawValue,
                    message: "the peer passed a \(what) descriptor; `incoming` takes connected TCP and Unix stream sockets only, so it was closed",
                    context: "UnixConnection.incoming of \(peerDescription)"))
                continue
            }
            receiver.channel(self, didReceive: accepted)
        }
    }

    /// Whether the open handle's descriptor is an `AF_UNIX` stream socket.
    fileprivate var isUnixStreamSocket: Bool {
        var descriptor = uv_os_fd_t()
        guard uv_fileno(handle, &descriptor) == 0 else { return false }
        do {
            try UnixSocketNames.checkStreamSocket(descriptor, context: "a passed descriptor")
            return true
        } catch {
            return false  // the reason is the caller's ENOTSUP message
        }
    }

    /// Whether the open handle's descriptor is a listening socket (`SO_ACCEPTCONN`): a server's, not a connection.
    fileprivate var isListeningSocket: Bool {
        var descriptor = uv_os_fd_t()
        var listening: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard uv_fileno(handle, &descriptor) == 0,
              getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0 else { return false }
        return listening != 0
    }

    /// What the open handle's descriptor is, for the refusal of a passed descriptor `incoming` cannot take:
    /// "pipe (FIFO)", "Unix datagram socket", "directory"... Read from the descriptor itself, not from
    /// libuv's handle type, which has no name for most of them (`uv_handle_type_name` of
    /// `UV_UNKNOWN_HANDLE`, what a Unix datagram socket or a directory is to libuv, is NULL).
    fileprivate var passedDescriptorKind: String {
        var descriptor = uv_os_fd_t()
        var status = stat()
        guard uv_fileno(handle, &descriptor) == 0, fstat(descriptor, &status) == 0 else { return "closed" }
        switch status.st_mode & S_IFMT {
        case S_IFIFO: return "pipe (FIFO)"
        case S_IFREG: return "regular file"
        case S_IFDIR: return "directory"
        case S_IFCHR: return "character device"
        case S_IFBLK: return "block device"
        case S_IFSOCK: return Self.socketKind(descriptor)
        default: return "special (eventfd, epoll or other anonymous inode)"
        }
    }

    /// "Unix datagram socket", "listening IPv4 stream socket", "netlink socket"...: its domain, type and whether it listens.
    private static func socketKind(_ descriptor: Int32) -> String {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(descriptor, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        let domain = switch option(SO_DOMAIN) {
        case AF_UNIX: "Unix"
        case AF_INET: "IPv4"
        case AF_INET6: "IPv6"
        case AF_NETLINK: "netlink"
        case let other?: "domain \(other)"
        case nil: "unknown"
        }
        let type = switch option(SO_TYPE) {
        case Int32(SOCK_STREAM.rawValue): "stream"
        case Int32(SOCK_DGRAM.rawValue): "datagram"
        case Int32(SOCK_SEQPACKET.rawValue): "seqpacket"
        case Int32(SOCK_RAW.rawValue): "raw"
        case let other?: "type \(other)"
        case nil: "unknown"
        }
        return (option(SO_ACCEPTCONN) == 1 ? "listening " : "") + "\(domain) \(type) socket"
    }

    // MARK: - sending

    /// Sends `message` with a duplicate of `passed`'s descriptor (`uv_write2`); closes `passed` here unless `keepOpen`.
    ///
    /// The descriptor travels in a handle of its own (a `dup`), so `passed` may
    /// close at once while the write waits in the queue: libuv reads the
    /// sending handle's descriptor only when the write goes out.
    func sendOnLoop(_ message: [UInt8], passing passed: StreamConnection, keepOpen: Bool,
              completion: @escaping ((any Error)?) -> Void) {
        assertInEventLoop()
        // Behind a file going out (sendFile), as every later write is.
        if isHandleOpen, fileSends?.holdIfSending({ [self] in sendOnLoop(message, passing: passed, keepOpen: keepOpen, completion: completion) }) == true { return }
        let context = "UnixConnection.send(_:with:) over \(peerDescription)"
        guard ipc else {
            completion(UVError(code: UVError.invalidArgumentCode,
                               message: "descriptor passing needs an IPC connection (UnixSocketOptions(ipc: true) on both ends); this one is not",
                               context: context))
            return
        }
        guard !message.isEmpty else {
            completion(UVError(code: UVError.invalidArgumentCode,
                               message: "the message is empty: a descriptor travels with at least one byte",
                               context: context))
            return
        }
        guard acceptsWrites else {
            completion(UVError(code: UV_EPIPE.rawValue,
                               message: isHandleOpen ? "the IPC connection was shut down for writing" : "the IPC connection is closed",
                               context: context))
            return
        }
        bits.busy = true
        guard passed !== self else {
            completion(UVError(code: UVError.invalidArgumentCode,
                               message: "an IPC connection cannot pass itself", context: context))
            return
        }
        guard passed.loop === loop else {
            completion(UVError(code: UVError.invalidArgumentCode,
                               message: "the connection passed lives on loop '\(passed.loop.name)' and the IPC connection on '\(loop.name)': pass a connection over an IPC connection on its own loop",
                               context: context))
            return
        }
        guard passed.isHandleOpen else {
            completion(passed.closedError("passing it over \(peerDescription)"))
            return
        }
        if bits.simulated { return sendSimulated(message, passing: passed, keepOpen: keepOpen, completion: completion) }
        let carrier: PassedDescriptor
        do {
            carrier = try PassedDescriptor.duplicate(passed, over: self)
        } catch {
            completion(error)
            return
        }
        let request = DescriptorWriteRequest(loop: loop, message: message, carrier: carrier) { [self] status in
            self.descriptorWriteDidFinish(status: status, completion: completion)
        }
        let result = request.start(on: uvStream)
        guard result == 0 else {
            carrier.closeHandle()
            completion(UVError(code: result, context: context))
            return
        }
        extras.publishedWriteQueue.store(loopQueuedWriteByteCount, ordering: .relaxed)
        if !keepOpen {
            // Handed over: nothing more is read or written here (its reader completes).
            passed.end(.closed)
        }
    }

    private func descriptorWriteDidFinish(status: Int32, completion: ((any Error)?) -> Void) {
        if isHandleOpen { extras.publishedWriteQueue.store(loopQueuedWriteByteCount, ordering: .relaxed) }
        let context = "passing a descriptor over \(peerDescription)"
        if status == 0 {
            // The message went to the peer (a Unix-socket server's idle timeout counts it, as any write).
            noteActivityIfTracked()
            completion(nil)
        } else if status == UV_ECANCELED.rawValue {
            completion(UVError(code: status, message: "the IPC connection closed before the descriptor was sent", context: context))
        } else {
            let error = UVError(code: status, context: context)
            completion(error)
            end(.failed(error))
        }
    }
}

/// A `uv_pipe_t` around a duplicate of a passed connection's descriptor: the sending handle of one
/// `uv_write2`, closed (closing the duplicate) when the write has finished.
final class PassedDescriptor: LoopHandle, @unchecked Sendable {
    // Loop thread only; `what` is immutable.
    private let what: String

    private init(loop: EventLoop, what: String) {
        self.what = what
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE))
    }

    override var label: String { "descriptor of \(what) being passed" }

    /// Duplicates `passed`'s descriptor into a new open pipe handle on `channel`'s loop.
    static func duplicate(_ passed: StreamConnection, over channel: StreamConnection) throws(UVError) -> PassedDescriptor {
        let context = "passing \(passed.peerDescription) over \(channel.peerDescription)"
        var descriptor = uv_os_fd_t()
        try uvCheck(uv_fileno(passed.handle, &descriptor), "uv_fileno for \(context)")
        let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 3)
        guard copy >= 0 else { throw UVError(code: -errno, context: "dup for \(context)") }
        let carrier = PassedDescriptor(loop: channel.loop, what: passed.peerDescription)
        let pipe = carrier.pointer(as: uv_pipe_t.self)
        do throws(UVError) {
            try uvCheck(uv_pipe_init(channel.loop.uvLoop, pipe, 0), "uv_pipe_init for \(context)")
        } catch {
            Glibc.close(copy)
            throw error
        }
        carrier.didOpen()
        do throws(UVError) {
            try uvCheck(uv_pipe_open(pipe, copy), "uv_pipe_open for \(context)")
        } catch {
            Glibc.close(copy)  // libuv did not take it
            carrier.closeHandle()
            throw error
        }
        return carrier
    }

    var stream: UnsafeMutablePointer<uv_stream_t> { pointer(as: uv_stream_t.self) }
}

/// One `uv_write2`: a message and the handle whose descriptor goes with it.
final class DescriptorWriteRequest: LoopRequest {
    // Loop thread only.
    private let message: [UInt8]
    private let carrier: PassedDescriptor
    private var finished: ((Int32) -> Void)?

    init(loop: EventLoop, message: [UInt8], carrier: PassedDescriptor, finished: @escaping (Int32) -> Void) {
        self.message = message
        self.carrier = carrier
        self.finished = finished
        // Untracked like every write on a stream: closing the stream calls it back (see LoopRequest).
        super.init(loop: loop, type: UV_WRITE, tracked: false)
    }

    override var label: String { "write of \(message.count) bytes with a descriptor" }

    /// Starts the write; libuv's result (negative: refused, nothing pending).
    func start(on stream: UnsafeMutablePointer<uv_stream_t>) -> Int32 {
        let base = message.withUnsafeBufferPointer { UnsafeMutableRawPointer(mutating: $0.baseAddress!) }
        // libuv copies the uv_buf_t; the bytes stay put while `message` holds the array.
        var buffer = uv_buf_t(base: base.assumingMemoryBound(to: CChar.self), len: message.count)
        willStart()
        let result = uv_write2(pointer(as: uv_write_t.self), stream, &buffer, 1, carrier.stream, descriptorWriteCallback)
        if result < 0 { startFailed() }
        return result
    }

    fileprivate func finish(status: Int32) {
        didFinish()
        carrier.closeHandle()
        let finished = self.finished
        self.finished = nil
        finished?(status)
    }
}

private let descriptorWriteCallback: uv_write_cb = { request, status in
    guard let data = request?.pointee.data else { return }
    Unmanaged<DescriptorWriteRequest>.fromOpaque(data).takeRetainedValue().finish(status: status)
}

internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One end of a connected pair of Unix sockets (`UnixSocket.pair()`), not yet opened on a loop.
///
/// It owns its descriptor: `UnixSocket.open(_:)` takes it over (once: a
/// second open fails with `EBADF`), `takeDescriptor()` hands it to you (for
/// a child process), and an end nobody took closes it when released.
///
/// Thread rule: safe from any thread.
public final class UnixSocketEnd: Sendable, CustomStringConvertible {
    /// The descriptor, or -1 once taken.
    private let descriptor: LockedValue<Int32>

    init(descriptor: Int32) {
        self.descriptor = LockedValue(descriptor)
    }

    deinit {
        let left = descriptor.withLock { $0 }
        if left >= 0 { Glibc.close(left) }
    }

    /// `"unix socket pair end (fd 7)"`, or `"(taken)"` once opened or taken.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        let value = descriptor.withLock { $0 }
        return value >= 0 ? "unix socket pair end (fd \(value))" : "unix socket pair end (taken)"
    }

    /// Hands the descriptor over: the caller owns it from now on (closes it, or gives it to a child process). Nil when already taken.
    ///
    /// The descriptor is close-on-exec: a child gets it only where its spawn
    /// maps it to one of the child's descriptors.
    ///
    /// - Returns: The descriptor, or nil if it was taken or opened before.
    ///
    /// Thread rule: safe from any thread.
    public func takeDescriptor() -> Int32? {
        let taken = descriptor.withLock { value in
            let taken = value
            value = -1
            return taken
        }
        return taken >= 0 ? taken : nil
    }
}

extension UnixSocket {
    /// Makes a connected pair of Unix stream sockets (`socketpair`), for talking to a child process or between loops.
    ///
    /// Open each end with `open(_:options:on:)`, on the loop that will use it
    /// (the two may live on different loops); or give one end's descriptor
    /// to a child process (`takeDescriptor()`), which opens it with
    /// `open(descriptor:options:on:)`. With `UnixSocketOptions(ipc: true)` on
    /// both opens, the pair can pass connections (`UnixConnection.send(_:with:keepOpen:)`).
    ///
    /// - Returns: The two ends.
    /// - Throws: `UVError` when `socketpair` fails (`EMFILE`, `ENFILE`).
    ///
    /// Thread rule: safe from any thread.
    public static func pair() throws(UVError) -> (UnixSocketEnd, UnixSocketEnd) {
        var descriptors: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &descriptors) == 0 else {
            throw UVError(code: -errno, context: "socketpair(AF_UNIX) for UnixSocket.pair()")
        }
        return (UnixSocketEnd(descriptor: descriptors[0]), UnixSocketEnd(descriptor: descriptors[1]))
    }

    /// Opens one end of a pair on a loop and sends it as a connection.
    ///
    /// The end is taken over when the signal is subscribed (a second
    /// subscription, or an end already taken, fails with `EBADF`). As with
    /// `connect`, the connection belongs to the subscription: disposing it
    /// closes the connection, and the signal completes when the connection closes.
    ///
    /// - Parameters:
    ///   - end: An end from `pair()`.
    ///   - options: Buffer limits, and `ipc` for descriptor passing.
    ///   - loop: Where the connection lives; nil for the subscription's home loop.
    /// - Returns: A signal of one connection; it completes when the connection closes.
    ///
    /// Thread rule: safe from any thread.
    public static func open(_ end: UnixSocketEnd, options: UnixSocketOptions = UnixSocketOptions(),
                            on loop: EventLoop? = nil) -> Signal<UnixConnection> {
        let context = "UnixSocket.open(\(end))"
        return adopting(context: context, options: options, on: loop) { () throws(UVError) in
            guard let descriptor = end.takeDescriptor() else {
                throw UVError(code: UV_EBADF.rawValue, message: "this end of the pair was already opened or taken", context: context)
            }
            return (descriptor, "socket pair end")
        }.debugNamed("+UnixSocket.open(pair end)")
    }

    /// Opens a connected Unix stream socket this process already has (one a parent process passed down) and sends it as a connection.
    ///
    /// The descriptor is checked first: one that is not open (`EBADF`), not a
    /// socket (`ENOTSOCK`), or not an `AF_UNIX` stream socket (`EINVAL`) is
    /// refused and left alone. Once it passed, it belongs to the connection
    /// (closed with it). Subscribe once: a second open of the same number
    /// would take over whatever the number names by then.
    ///
    /// - Parameters:
    ///   - descriptor: A connected `AF_UNIX` `SOCK_STREAM` socket.
    ///   - options: Buffer limits, and `ipc` for descriptor passing.
    ///   - loop: Where the connection lives; nil for the subscription's home loop.
    /// - Returns: A signal of one connection; it completes when the connection closes.
    ///
    /// Thread rule: safe from any thread.
    public static func open(descriptor: Int32, options: UnixSocketOptions = UnixSocketOptions(),
                            on loop: EventLoop? = nil) -> Signal<UnixConnection> {
        let context = "UnixSocket.open(descriptor: \(descriptor))"
        return adopting(context: context, options: options, on: loop) { () throws(UVError) in
            try UnixSocketNames.checkStreamSocket(descriptor, context: context)
            return (descriptor, "descriptor \(descriptor)")
        }.debugNamed("+UnixSocket.open(descriptor: \(descriptor))")
    }

    private static func adopting(context: String, options: UnixSocketOptions, on loop: EventLoop?,
                                 _ socket: @escaping @Sendable () throws(UVError) -> (descriptor: Int32, name: String)) -> Signal<UnixConnection> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: context, refusingSimulation: "Unix") { loop in
                let attempt = UnixConnectAttempt(loop: loop, path: "", context: context, options: options, subscriber: subscriber)
                attempt.start(socket)
                return attempt
            }
        }
    }
}

/// Names and checks for sockets ReactiveUV did not bind itself (pair ends, inherited or passed descriptors).
enum UnixSocketNames {
    /// The name of the socket `stream`'s peer is bound to, else its own, else nil (an unnamed socket).
    static func peerName(of stream: StreamConnection) -> String? {
        let pipe = stream.pointer(as: uv_pipe_t.self)
        for query in [uv_pipe_getpeername, uv_pipe_getsockname] {
            var buffer = [CChar](repeating: 0, count: 110)
            var size = buffer.count
            if query(pipe, &buffer, &size) == 0, size > 0, size <= buffer.count {
                return String(decoding: buffer[0..<size].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
        return nil
    }

    /// Checks that `descriptor` is an open `AF_UNIX` stream socket.
    static func checkStreamSocket(_ descriptor: Int32, context: String) throws(UVError) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw UVError(code: -errno, message: "the descriptor is not open", context: context)
        }
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw UVError(code: UV_ENOTSOCK.rawValue, message: "the descriptor is not a socket", context: context)
        }
        var domain: Int32 = 0
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 else {
            throw UVError(code: -errno, context: "getsockopt(SO_DOMAIN) for \(context)")
        }
        length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else {
            throw UVError(code: -errno, context: "getsockopt(SO_TYPE) for \(context)")
        }
        guard domain == AF_UNIX, type == Int32(SOCK_STREAM.rawValue) else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "the descriptor is a socket but not a Unix stream socket (domain \(domain), type \(type))",
                          context: context)
        }
    }
}

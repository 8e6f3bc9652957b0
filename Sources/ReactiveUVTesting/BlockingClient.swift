import Glibc

/// A plain blocking TCP client on POSIX sockets, connected to 127.0.0.1, for driving a server
/// from a test thread. Every read has a receive timeout, so a silent server fails the test
/// instead of hanging it. Peer faults: `shutdownWrite()` (FIN), `reset()` (RST), `close()`.
///
/// Thread rule: use from one thread at a time (one thread may read while another
/// only sends, as a socket allows); never from a loop thread, where it would block the loop.
public final class BlockingClient: @unchecked Sendable {
    // Sendable: `descriptor` is immutable; `closed` is behind its own lock; the kernel serialises the socket calls.
    /// The connected socket, for options and calls this type does not wrap.
    ///
    /// Thread rule: use from one thread at a time.
    public let descriptor: Int32
    private let closed = Locked(false)

    /// Connects to 127.0.0.1:`port`, then sets a receive timeout. `beforeConnect` gets the socket
    /// first, for options that must precede the handshake (see `shrinkBuffers(_:)`).
    ///
    /// - Throws: `BlockingClientError` if `port` is not 0...65535, `receiveTimeout` is negative, or a
    ///   socket call fails (with its `errno`: `ECONNREFUSED` when nothing listens).
    ///
    /// Thread rule: safe from any thread that is no loop's.
    public init(port: Int, receiveTimeout: Duration = .seconds(20), beforeConnect: (Int32) -> Void = { _ in }) throws {
        guard let networkPort = UInt16(exactly: port) else {
            throw BlockingClientError("port \(port) is not a TCP port (0...65535)", errno: EINVAL)
        }
        let timeout = try Self.socketTimeout(receiveTimeout, for: "receive timeout")
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw BlockingClientError("socket() failed", errno: errno) }
        beforeConnect(descriptor)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = networkPort.bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            let code = errno
            Glibc.close(descriptor)
            throw BlockingClientError("connect to 127.0.0.1:\(port) failed", errno: code)
        }
        self.descriptor = descriptor
        try setOption(SO_RCVTIMEO, timeout, "SO_RCVTIMEO")
    }

    /// The local port (to match this client with a server's reports), or 0 if it cannot be read.
    ///
    /// Thread rule: safe from any thread.
    public var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let read = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) == 0 }
        }
        return read ? Int(UInt16(bigEndian: address.sin_port)) : 0
    }

    /// Makes a receive that gets nothing for `duration` give up (`.zero` waits for ever).
    ///
    /// - Throws: `BlockingClientError` for a negative duration or a failed `setsockopt`.
    ///
    /// Thread rule: use from one thread at a time.
    public func setReceiveTimeout(_ duration: Duration) throws {
        try setOption(SO_RCVTIMEO, Self.socketTimeout(duration, for: "receive timeout"), "SO_RCVTIMEO")
    }

    /// Makes a send that cannot progress for `duration` give up (`.zero` waits for ever): `send(_:_:)`
    /// then returns short, which is how a test sees flow control stop it.
    ///
    /// - Throws: `BlockingClientError` for a negative duration or a failed `setsockopt`.
    ///
    /// Thread rule: use from one thread at a time.
    public func setSendTimeout(_ duration: Duration) throws {
        try setOption(SO_SNDTIMEO, Self.socketTimeout(duration, for: "send timeout"), "SO_SNDTIMEO")
    }

    /// Sends `bytes[range]` (all of `bytes` by default), blocking while the peer's window is full;
    /// returns how many were sent before an error or a send timeout.
    ///
    /// Thread rule: use from one thread at a time.
    @discardableResult
    public func send(_ bytes: [UInt8], _ range: Range<Int>? = nil) -> Int {
        let range = (range ?? 0..<bytes.count).clamped(to: 0..<bytes.count)
        var offset = range.lowerBound
        while offset < range.upperBound {
            let sent = bytes.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress! + offset, range.upperBound - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { break }
            offset += sent
        }
        return offset - range.lowerBound
    }

    /// Sends every byte, blocking while the peer's window is full.
    ///
    /// - Throws: `BlockingClientError` when a send fails or times out, saying how far it got.
    ///
    /// Thread rule: use from one thread at a time.
    public func sendAll(_ bytes: [UInt8]) throws {
        let sent = send(bytes)
        guard sent == bytes.count else {
            throw BlockingClientError("send failed after \(sent) of \(bytes.count) bytes", errno: errno)
        }
    }

    /// Sends as much of `bytes` as the socket takes now (`MSG_DONTWAIT`); returns how many it took.
    ///
    /// Thread rule: use from one thread at a time.
    public func sendWithoutWaiting(_ bytes: [UInt8]) -> Int {
        var total = 0
        while total < bytes.count {
            let sent = bytes.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress! + total, bytes.count - total, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            guard sent > 0 else { return total }
            total += sent
        }
        return total
    }

    /// Receives up to `count` bytes: empty at EOF, nil on an error or timeout (then `errno` says which).
    ///
    /// Thread rule: use from one thread at a time.
    public func receive(upTo count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: max(count, 0))
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { return nil }
            buffer.removeLast(buffer.count - got)
            return buffer
        }
    }

    /// Receives exactly `count` bytes.
    ///
    /// - Throws: `BlockingClientError` on EOF, an error or a timeout, saying how many had come.
    ///
    /// Thread rule: use from one thread at a time.
    public func receive(exactly count: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(max(count, 0))
        while result.count < count {
            guard let chunk = receive(upTo: min(count - result.count, 65_536)) else {
                throw BlockingClientError("recv failed after \(result.count) of \(count) bytes", errno: errno)
            }
            guard !chunk.isEmpty else { throw BlockingClientError("EOF after \(result.count) of \(count) bytes") }
            result.append(contentsOf: chunk)
        }
        return result
    }

    /// Reads until EOF and returns the bytes.
    ///
    /// - Throws: `BlockingClientError` on an error (a reset is `ECONNRESET`) or a timeout.
    ///
    /// Thread rule: use from one thread at a time.
    public func receiveUntilEOF() throws -> [UInt8] {
        let (bytes, end) = receiveUntilEnd()
        switch end {
        case .endOfFile: return bytes
        case .reset: throw BlockingClientError("connection reset after \(bytes.count) bytes", errno: ECONNRESET)
        case .timedOut: throw BlockingClientError("receive timed out after \(bytes.count) bytes", errno: EAGAIN)
        case .failed(let code): throw BlockingClientError("recv failed after \(bytes.count) bytes", errno: code)
        }
    }

    /// How a read until the connection's end finished.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum ReadEnd: Equatable, Sendable, CustomStringConvertible {
        /// The peer closed (FIN): `recv` returned 0.
        case endOfFile
        /// The peer reset the connection (ECONNRESET).
        case reset
        /// Nothing came before the receive timeout: the peer left the connection hanging.
        case timedOut
        /// Another `recv` error.
        case failed(errno: Int32)

        /// Whether the peer ended the connection (FIN or RST), as opposed to a timeout or another error.
        ///
        /// Thread rule: safe from any thread.
        public var endedByPeer: Bool { self == .endOfFile || self == .reset }

        /// `"EOF"`, `"ECONNRESET"`, or what went wrong.
        ///
        /// Thread rule: safe from any thread.
        public var description: String {
            switch self {
            case .endOfFile: "EOF"
            case .reset: "ECONNRESET"
            case .timedOut: "receive timeout (nothing from the peer)"
            case .failed(let code): "recv failed: errno \(code)"
            }
        }
    }

    /// Reads until the connection ends, and says how it ended (or that it timed out).
    ///
    /// Thread rule: use from one thread at a time.
    public func receiveUntilEnd() -> (bytes: [UInt8], end: ReadEnd) {
        var result: [UInt8] = []
        while true {
            guard let chunk = receive(upTo: 65_536) else {
                switch errno {
                case ECONNRESET: return (result, .reset)
                case EAGAIN, EWOULDBLOCK: return (result, .timedOut)
                case let code: return (result, .failed(errno: code))
                }
            }
            if chunk.isEmpty { return (result, .endOfFile) }
            result.append(contentsOf: chunk)
        }
    }

    /// Half-closes (FIN): the peer reads EOF, and this side can still read.
    ///
    /// Thread rule: use from one thread at a time.
    public func shutdownWrite() { Glibc.shutdown(descriptor, Int32(SHUT_WR)) }

    /// Closes with RST (`SO_LINGER` 0): in-flight data is dropped and the peer sees `ECONNRESET`.
    /// Does nothing once closed.
    ///
    /// Thread rule: safe from any thread.
    public func reset() {
        guard markClosed() else { return }
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        Glibc.close(descriptor)
    }

    /// Closes normally (FIN). Does nothing once closed, so a second close cannot close a descriptor
    /// another thread has since been given.
    ///
    /// Thread rule: safe from any thread.
    public func close() {
        guard markClosed() else { return }
        Glibc.close(descriptor)
    }

    /// Makes the peer's sending slow and this socket's buffering small (a 1,000-byte MSS, the
    /// smallest receive buffer). Pass as `beforeConnect`; echoed bytes then queue in the server.
    ///
    /// Thread rule: safe from any thread, on a socket not yet connected.
    public static func shrinkBuffers(_ descriptor: Int32) {
        var segment: Int32 = 1000, receiveBuffer: Int32 = 4096
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_MAXSEG, &segment, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Whether this call is the one that closes (the first close or reset).
    private func markClosed() -> Bool {
        closed.withLock { wasClosed in
            defer { wasClosed = true }
            return !wasClosed
        }
    }

    private func setOption(_ option: Int32, _ value: timeval, _ name: String) throws {
        var value = value
        guard setsockopt(descriptor, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
            throw BlockingClientError("setsockopt(\(name)) failed", errno: errno)
        }
    }

    private static func socketTimeout(_ duration: Duration, for what: String) throws -> Glibc.timeval {
        guard duration >= .zero else { throw BlockingClientError("a negative \(what) (\(duration))", errno: EINVAL) }
        let (seconds, attoseconds) = duration.components
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }
}

/// A `BlockingClient` call that failed: what was attempted and the `errno` it met, if any.
///
/// Thread rule: a value type; safe from any thread.
public struct BlockingClientError: Error, CustomStringConvertible, Sendable {
    /// What failed and how far it got ("connect to 127.0.0.1:7 failed").
    public let message: String
    /// The `errno` the socket call set (`ECONNREFUSED`, `ECONNRESET`, ...), or nil when none applies (EOF).
    public let errno: Int32?

    /// An error saying `message`, with the `errno` the failed call set.
    ///
    /// Thread rule: safe from any thread.
    public init(_ message: String, errno: Int32? = nil) {
        self.message = message
        self.errno = errno
    }

    /// `"connect to 127.0.0.1:7 failed: errno 111 (Connection refused)"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        guard let errno else { return message }
        return "\(message): errno \(errno) (\(String(cString: strerror(errno))))"
    }
}

/// A port on 127.0.0.1 where nothing listens now (bound, read, and closed again), for a refused
/// connection or a port to listen on.
///
/// - Throws: `BlockingClientError` when no socket could be made or bound.
///
/// Thread rule: safe from any thread.
public func unusedPort() throws(BlockingClientError) -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw BlockingClientError("socket() failed", errno: errno) }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
            bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
        }
    }
    guard bound else { throw BlockingClientError("bind() to 127.0.0.1:0 failed", errno: errno) }
    return Int(UInt16(bigEndian: address.sin_port))
}

import Foundation
import ReactiveUVTesting

/// A blocking client of a Unix-domain socket, for tests that act as a separate program would
/// (the Unix-socket counterpart of `BlockingClient`).
///
/// Every read has a receive timeout, so a server that never answers fails the test instead of
/// hanging it (the hang guard, not a bound on the server's time).
///
/// Thread rule: use from one thread at a time; never from a loop thread.
final class UnixBlockingClient: @unchecked Sendable {
    // `descriptor` is written by `close()` only, on the thread that uses the client.
    private var descriptor: Int32

    /// Connects to `path` (`connect` on a Unix socket completes at once or fails).
    ///
    /// - Throws: `BlockingClientError` with the `errno` (`ENOENT`: no socket file; `ECONNREFUSED`: nobody listens).
    init(path: String, receiveTimeout: Duration = .seconds(30)) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw BlockingClientError("socket failed", errno: errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw BlockingClientError("connect \(path) failed", errno: code)
        }
        let (seconds, attoseconds) = receiveTimeout.components
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func sendAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { throw BlockingClientError("send failed after \(offset) of \(bytes.count) bytes", errno: errno) }
            offset += sent
        }
    }

    func shutdownWrite() { _ = Glibc.shutdown(descriptor, Int32(SHUT_WR)) }

    /// Up to `count` bytes: empty at EOF, nil on an error or timeout (`errno` says which).
    func receive(upTo count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { return nil }
            return Array(buffer[0..<got])
        }
    }

    /// Exactly `count` bytes; throws on EOF, an error or a timeout.
    func receive(exactly count: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        while result.count < count {
            guard let chunk = receive(upTo: min(count - result.count, 65_536)) else {
                throw BlockingClientError("recv failed after \(result.count) of \(count) bytes", errno: errno)
            }
            guard !chunk.isEmpty else { throw BlockingClientError("EOF after \(result.count) of \(count) bytes") }
            result += chunk
        }
        return result
    }

    /// Reads until the connection ends, and says how (a timeout is reported as such, not as an end).
    func receiveUntilEnd() -> (bytes: [UInt8], end: BlockingClient.ReadEnd) {
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
            result += chunk
        }
    }

    /// Reads until EOF; throws on a reset, an error or a timeout.
    func receiveUntilEOF() throws -> [UInt8] {
        let (bytes, end) = receiveUntilEnd()
        guard end == .endOfFile else { throw BlockingClientError("the connection ended with \(end) after \(bytes.count) bytes") }
        return bytes
    }

    func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }
}

/// The sockets this process has open (entries of `/proc/self/fd` that are sockets; throws where it cannot
/// be read, as `openDescriptorTargets` does).
func openSocketCount() throws -> Int {
    try openDescriptorTargets().filter { $0.hasPrefix("socket:") }.count
}

import Foundation
import XCTest

/// A plain blocking TCP client on POSIX sockets, for driving servers from test threads
/// independently of ReactiveUV's own client.
final class BlockingClient: @unchecked Sendable {
    // `descriptor` is immutable; each test uses one client from one thread at a time (a reader thread only reads).
    let descriptor: Int32

    /// Connects to 127.0.0.1:`port`, with a receive timeout so a broken server cannot hang the test.
    ///
    /// `beforeConnect` gets the socket first, to set options that must precede the handshake.
    init(port: Int, receiveTimeout: Duration = .seconds(20), beforeConnect: (Int32) -> Void = { _ in }) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
        beforeConnect(descriptor)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            let code = errno
            Glibc.close(descriptor)
            throw TestFailure("connect to 127.0.0.1:\(port) failed: errno \(code)")
        }
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        self.descriptor = descriptor
    }

    /// Sends every byte (blocking while the peer's window is full).
    func sendAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw TestFailure("send failed: errno \(errno)") }
            offset += sent
        }
    }

    /// Receives exactly `count` bytes, or throws on EOF, error or timeout.
    func receive(exactly count: Int) throws -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = result.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + offset, count - offset, 0) }
            guard got > 0 else {
                throw TestFailure(got == 0 ? "EOF after \(offset) of \(count) bytes" : "recv failed after \(offset) of \(count) bytes: errno \(errno)")
            }
            offset += got
        }
        return result
    }

    /// Reads until EOF; returns the bytes, or throws on an error or timeout.
    func receiveUntilEOF() throws -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let got = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, 65_536, 0) }
            if got == 0 { return result }
            guard got > 0 else { throw TestFailure("recv failed after \(result.count) bytes: errno \(errno)") }
            result.append(contentsOf: chunk[0..<got])
        }
    }

    /// Makes the peer's sending slow and its kernel buffering small: a 1,000-byte MSS
    /// (the peer's send buffer grows per segment, so it stays small) and the smallest
    /// receive buffer. Call before connecting; echoed bytes then queue in the server.
    static func shrinkBuffers(_ descriptor: Int32) {
        var segment: Int32 = 1000, receiveBuffer: Int32 = 4096
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_MAXSEG, &segment, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, socklen_t(MemoryLayout<Int32>.size))
    }

    /// How a read until the connection's end finished.
    enum ReadEnd: Equatable, CustomStringConvertible {
        /// The peer closed (FIN): `recv` returned 0.
        case endOfFile
        /// The peer reset the connection (ECONNRESET).
        case reset
        /// Nothing came before the receive timeout: the peer left the connection hanging.
        case timedOut
        /// Another `recv` error.
        case failed(errno: Int32)

        /// Whether the peer ended the connection (FIN or RST), as opposed to a timeout or another error.
        var endedByPeer: Bool { self == .endOfFile || self == .reset }

        var description: String {
            switch self {
            case .endOfFile: "EOF"
            case .reset: "ECONNRESET"
            case .timedOut: "receive timeout (nothing from the peer)"
            case .failed(let code): "recv failed: errno \(code)"
            }
        }
    }

    /// Reads until the connection ends, and says how it ended (a timeout is not an end: it is reported as such).
    func receiveUntilEnd() -> (bytes: [UInt8], end: ReadEnd) {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let got = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, 65_536, 0) }
            if got > 0 {
                result.append(contentsOf: chunk[0..<got])
                continue
            }
            if got == 0 { return (result, .endOfFile) }
            let code = errno
            if code == EINTR { continue }
            switch code {
            case ECONNRESET: return (result, .reset)
            case EAGAIN, EWOULDBLOCK: return (result, .timedOut)
            default: return (result, .failed(errno: code))
            }
        }
    }

    /// Half-closes (FIN).
    func shutdownWrite() { Glibc.shutdown(descriptor, Int32(SHUT_WR)) }

    /// Closes with RST (SO_LINGER 0).
    func reset() {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        Glibc.close(descriptor)
    }

    func close() { Glibc.close(descriptor) }
}

/// A deterministic byte pattern that differs per `seed`, so a misplaced byte is caught.
func pattern(_ count: Int, seed: Int) -> [UInt8] {
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
    var result = [UInt8](repeating: 0, count: count)
    result.withUnsafeMutableBytes { bytes in
        var offset = 0
        while offset < count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            var word = state
            let take = min(8, count - offset)
            withUnsafeBytes(of: &word) { bytes.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: take) }
            offset += take
        }
    }
    return result
}

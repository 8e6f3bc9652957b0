import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class BlockingClientTests: XCTestCase {
    /// A port outside 0...65535 is an error naming it, not a trap in `UInt16(port)`.
    func testAPortOutOfRangeIsAnError() {
        for port in [-1, 65_536, Int.max] {
            XCTAssertThrowsError(try BlockingClient(port: port)) { error in
                let failure = error as? BlockingClientError
                XCTAssertEqual(failure?.errno, EINVAL, "\(error)")
                XCTAssertTrue("\(error)".contains("port \(port) is not a TCP port"), "\(error)")
            }
        }
    }

    /// A negative timeout is refused at the door (the kernel would refuse it too, and that used to go unnoticed).
    func testANegativeTimeoutIsAnError() throws {
        try withListener { port, _ in
            XCTAssertThrowsError(try BlockingClient(port: port, receiveTimeout: .milliseconds(-1))) { error in
                XCTAssertEqual((error as? BlockingClientError)?.errno, EINVAL, "\(error)")
            }
            let client = try BlockingClient(port: port)
            defer { client.close() }
            XCTAssertThrowsError(try client.setSendTimeout(.seconds(-1))) { error in
                XCTAssertTrue("\(error)".contains("a negative send timeout"), "\(error)")
            }
        }
    }

    /// Nothing listening: the error carries `ECONNREFUSED`, so a test can assert on it.
    func testConnectingWhereNothingListensCarriesECONNREFUSED() throws {
        var port = 0
        try withListener { listening, _ in port = listening }  // closed again: nothing listens there now
        XCTAssertThrowsError(try BlockingClient(port: port)) { error in
            XCTAssertEqual((error as? BlockingClientError)?.errno, ECONNREFUSED, "\(error)")
        }
    }

    /// Bytes both ways, a half-close read as EOF, and a timeout reported as a timeout rather than an end.
    func testSendReceiveHalfCloseAndTimeout() throws {
        try withListener { port, accept in
            let client = try BlockingClient(port: port, receiveTimeout: .milliseconds(50))
            defer { client.close() }
            let server = try accept()
            defer { close(server) }
            XCTAssertEqual(client.localPort, try peerPort(of: server))

            let payload = bytePattern(20_000, seed: 3)
            try client.sendAll(payload)
            XCTAssertEqual(try read(server, payload.count), payload)
            let reply = bytePattern(10, seed: 4)
            XCTAssertEqual(write(server, reply, reply.count), reply.count)
            XCTAssertEqual(try client.receive(exactly: 10), reply)

            let silence = client.receiveUntilEnd()
            XCTAssertEqual(silence.end, .timedOut)
            XCTAssertFalse(silence.end.endedByPeer)
            XCTAssertThrowsError(try client.receiveUntilEOF(), "a timeout is not an EOF")

            client.shutdownWrite()
            XCTAssertEqual(try read(server, 1), [], "the server reads EOF after the half-close")
            XCTAssertEqual(write(server, reply, reply.count), reply.count, "the client can still be written to")
            shutdown(server, Int32(SHUT_WR))
            let rest = client.receiveUntilEnd()
            XCTAssertEqual(rest.bytes, reply)
            XCTAssertEqual(rest.end, .endOfFile)
        }
    }

    /// `reset()` is an RST the peer reads as `ECONNRESET`.
    func testResetIsSeenAsECONNRESET() throws {
        try withListener { port, accept in
            let client = try BlockingClient(port: port)
            let server = try accept()
            defer { close(server) }
            client.reset()
            var byte: UInt8 = 0
            XCTAssertEqual(recv(server, &byte, 1, 0), -1)
            XCTAssertEqual(errno, ECONNRESET)
        }
    }

    /// A second close must not close the descriptor number the kernel has since handed to someone else.
    func testASecondCloseLeavesAReusedDescriptorAlone() throws {
        try withListener { port, _ in
            let client = try BlockingClient(port: port)
            client.close()
            let reused = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(reused) }
            try XCTSkipUnless(reused == client.descriptor, "another thread took descriptor \(client.descriptor) first")
            client.close()
            client.reset()
            XCTAssertEqual(fcntl(reused, F_GETFD), 0, "the reused descriptor is still open (errno \(errno))")
        }
    }

    /// The byte pattern is deterministic per seed and differs between seeds.
    func testBytePatternIsDeterministicPerSeed() {
        XCTAssertEqual(bytePattern(1000, seed: 7), bytePattern(1000, seed: 7))
        XCTAssertNotEqual(bytePattern(1000, seed: 7), bytePattern(1000, seed: 8))
        XCTAssertEqual(bytePattern(13, seed: 7), Array(bytePattern(1000, seed: 7).prefix(13)))
        XCTAssertEqual(bytePattern(0, seed: 1), [])
    }
}

/// Runs `body` with a port on 127.0.0.1 that listens (a plain socket, backlog 8) and a
/// blocking `accept`; closes the listener afterwards.
private func withListener(_ body: (Int, () throws -> Int32) throws -> Void) throws {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard listener >= 0 else { throw BlockingClientError("socket() failed", errno: errno) }
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ready = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(listener, $0, length) == 0 && listen(listener, 8) == 0 && getsockname(listener, $0, &length) == 0
        }
    }
    guard ready else { throw BlockingClientError("bind/listen failed", errno: errno) }
    try body(Int(UInt16(bigEndian: address.sin_port))) {
        let accepted = accept(listener, nil, nil)
        guard accepted >= 0 else { throw BlockingClientError("accept failed", errno: errno) }
        return accepted
    }
}

/// The port of the peer connected to `descriptor`.
private func peerPort(of descriptor: Int32) throws -> Int {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let read = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) == 0 }
    }
    guard read else { throw BlockingClientError("getpeername failed", errno: errno) }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Reads exactly `count` bytes from `descriptor`, or fewer at EOF.
private func read(_ descriptor: Int32, _ count: Int) throws -> [UInt8] {
    var result = [UInt8](repeating: 0, count: count)
    var offset = 0
    while offset < count {
        let got = result.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + offset, count - offset, 0) }
        guard got >= 0 else { throw BlockingClientError("recv failed", errno: errno) }
        if got == 0 { break }
        offset += got
    }
    return Array(result[0..<offset])
}

import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// TLS on a group's loops, through the `echo` sample's server (`EchoServer.run(..., on: group, tls:)`).
final class TLSGroupServerTests: XCTestCase {
    /// Runs `body` with a harness and a two-loop group, then checks every group loop closed with nothing open.
    private func withGroup(_ body: (LoopHarness, EventLoopGroup) throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        let group = EventLoopGroup(loopCount: 2, name: "tls")
        LoopHarness.run(file: file, line: line) { harness in
            defer {
                _ = harness.finish()
                for loop in group.loops {
                    do {
                        try harness.wait(for: "loop \(loop.name) has no open handle") { (try? loop.openHandles()) == [] }
                        let report = try loop.tryShutdown()
                        XCTAssertEqual(report.loopCloseResult, 0, "uv_loop_close on \(loop.name)", file: file, line: line)
                    } catch {
                        XCTFail("\(loop.name): \(error)", file: file, line: line)
                    }
                }
            }
            try body(harness, group)
        }
    }

    private func handshakeFailures(_ events: EventRecorder<EchoEvent>) -> [TLSError] {
        events.values.compactMap { if case .handshakeFailed(let error) = $0 { error } else { nil } }
    }

    func testTheEchoSampleServesTLSOverTCPOnAGroupAndReportsAPlainClient() throws {
        let certificates = try TLSTestCertificates.shared()
        withGroup { harness, group in
            let events = try harness.record(EchoServer.run(port: 0, on: group, tls: certificates.server()), label: "echo")
            guard case .listening(let address) = try events.waitForValues(1)[0] else { throw TestFailure("not listening") }
            for index in 0..<4 {
                let client = try startPython(pythonClient, ["\(address.port)", certificates.caCertificate, "client \(index)", "-", "-"])
                let output = client.finish().text
                XCTAssertTrue(output.contains("GOT client \(index)"), output)
            }
            let plain = try BlockingClient(port: address.port)
            defer { plain.close() }
            try plain.sendAll(Array("plain text\r\n".utf8))
            XCTAssertNotEqual(plain.receiveUntilEnd().end, .timedOut, "the plain client was closed")
            try events.wait(for: "the plain client's handshake failure") { _ in !handshakeFailures(events).isEmpty }
            XCTAssertEqual(handshakeFailures(events).first, TLSError.badRecord)
        }
    }

    func testTheEchoSampleServesTLSOverAUnixSocketOnAGroup() throws {
        let certificates = try TLSTestCertificates.shared()
        try withTemporaryDirectory { directory in
            let path = directory + "/echo-tls.sock"
            withGroup { harness, group in
                let events = try harness.record(EchoServer.run(unixPath: path, on: group, tls: certificates.server()), label: "echo")
                _ = try events.waitForValues(1)
                for index in 0..<3 {
                    let connect = try harness.record(UnixSocket.connect(path: path, tls: certificates.client(serverName: "localhost"),
                                                                        on: harness.loop))
                    let connection = try connect.waitForValues(1)[0]
                    let bytes = try harness.record(connection.bytes)
                    let message = Array("unix client \(index)".utf8)
                    connection.send(message)
                    XCTAssertEqual(try waitForBytes(bytes, message.count), message)
                    XCTAssertNil(try harness.record(connection.close()).waitForTermination().error)
                }
            }
        }
    }

    func testListenWithTLSOnAGroupSendsEachConnectionOnItsOwnLoopAfterItsHandshake() throws {
        let certificates = try TLSTestCertificates.shared()
        let port = try unusedPort()
        withGroup { harness, group in
            let loops = Locked<[String]>([])
            let failures = Locked<[TLSError]>([])
            let server = TCPServer.listen(port: port, tls: try certificates.server(applicationProtocols: ["echo/1"]), on: group,
                                          onAccepted: { connection in
                                              XCTAssertTrue(connection.loop.inEventLoop, "onAccepted runs on the connection's loop")
                                              XCTAssertEqual(connection.tls?.applicationProtocol, "echo/1", "the handshake finished before")
                                              loops.withLock { $0.append(connection.loop.name) }
                                              connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                                          },
                                          onHandshakeFailure: { error in failures.withLock { $0.append(error) } })
            let connections = try harness.record(server, label: "listen")
            let client = try certificates.client(applicationProtocols: ["echo/1"])
            for index in 0..<6 {
                // The port is bound once every loop listens: the first connects may find nobody yet.
                var connection: TCPConnection?
                try harness.wait(for: "a TLS connection") {
                    connection = try? harness.record(TCP.connect(host: "localhost", port: port, tls: client, on: harness.loop)).waitForValues(1)[0]
                    return connection != nil
                }
                let bytes = try harness.record(connection!.bytes)
                let message = Array("group client \(index)".utf8)
                connection!.send(message)
                XCTAssertEqual(try waitForBytes(bytes, message.count), message)
                XCTAssertNil(try harness.record(connection!.close()).waitForTermination().error)
            }
            try harness.wait(for: "six connections sent") { connections.values.count >= 6 }
            XCTAssertEqual(connections.values.count, 6, "each connection sent once, after its handshake")
            XCTAssertTrue(Set(loops.current).isSubset(of: Set(group.loops.map(\.name))), "\(loops.current)")
            let plain = try BlockingClient(port: port)
            defer { plain.close() }
            try plain.sendAll(Array("plain text\r\n".utf8))
            try harness.wait(for: "the plain client's failure") { !failures.current.isEmpty }
            XCTAssertEqual(failures.current.first, TLSError.badRecord)
            XCTAssertEqual(connections.values.count, 6, "the plain client is never sent")
        }
    }

    func testListenWithTLSOverAUnixSocketOnAGroup() throws {
        let certificates = try TLSTestCertificates.shared()
        try withTemporaryDirectory { directory in
            let path = directory + "/listen-tls.sock"
            withGroup { harness, group in
                let server = UnixSocket.listen(path: path, tls: try certificates.server(), on: group, onAccepted: { connection in
                    connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                })
                let connections = try harness.record(server, label: "listen")
                let client = try certificates.client(serverName: "localhost")
                for index in 0..<3 {
                    var connection: UnixConnection?
                    try harness.wait(for: "a TLS connection") {
                        connection = try? harness.record(UnixSocket.connect(path: path, tls: client, on: harness.loop)).waitForValues(1)[0]
                        return connection != nil
                    }
                    let bytes = try harness.record(connection!.bytes)
                    let message = Array("unix listen \(index)".utf8)
                    connection!.send(message)
                    XCTAssertEqual(try waitForBytes(bytes, message.count), message)
                    XCTAssertEqual(connection!.tls?.resumed, index > 0, "the client resumes over a Unix socket too")
                    XCTAssertNil(try harness.record(connection!.close()).waitForTermination().error)
                }
                try harness.wait(for: "three connections sent") { connections.values.count >= 3 }
                XCTAssertEqual(connections.values.count, 3)
            }
        }
    }
}

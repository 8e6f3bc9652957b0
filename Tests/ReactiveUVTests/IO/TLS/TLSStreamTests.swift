import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A TLS connection behaves as a stream connection: the async forms, flow control with records
/// buffered while the reader is paused, and a peer that cuts a record short.
final class TLSStreamTests: TLSTestCase {
    func testWithConnectionEchoesMegabytesThroughAServerPausedByItsOwnBackpressure() async throws {
        let certificates = self.certificates!
        await withFinishedHarness(named: "tls-async") { harness in
            let server = try harness.record(
                TCPServer.serve(port: 0, tls: certificates.server(), on: harness.loop).map { event -> TCPServer.Event in
                    if case .accepted(let connection) = event {
                        connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                    }
                    return event
                }, label: "tls echo")
            guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
            // More than the echo's high-water mark: its reading pauses with records still in its read BIO.
            let payload = bytePattern(6 << 20, seed: 5)
            // The client writes it all before it reads: its own reading must not pause for its queue.
            let client = TCPOptions(limits: StreamBufferLimits(pausesReading: false))
            let answer = try await TCP.withConnection(host: "localhost", port: address.port, tls: certificates.client(), options: client,
                                                      on: harness.loop) { connection in
                connection.send(payload)
                var answer: [UInt8] = []
                for try await chunk in connection.bytes.values {
                    answer += chunk
                    if answer.count >= payload.count { break }
                }
                return answer
            }
            XCTAssertEqual(answer.count, payload.count)
            XCTAssertTrue(answer == payload, "every byte came back in order")
        }
    }

    func testAReaderThatComesLateGetsWhatArrivedWithTheHandshakeAndTheEnd() throws {
        let harness = LoopHarness(name: "tls-late-reader")
        defer { XCTAssertTrue(harness.finish().isClean) }
        let server = try harness.record(TCPServer.serve(port: 0, options: TCPOptions(allowHalfOpen: true),
                                                        tls: certificates.server(), on: harness.loop), label: "tls server")
        guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
        // The Python client sends right after its handshake, then waits for the echo; nobody reads yet.
        let client = try startPython(pythonClient, ["\(address.port)", certificates.caCertificate, "early bytes", "-", "-"])
        let connection = try waitForAccepted(server, 1)[0]
        // Its handshake is done and its bytes are on their way, maybe in the read that finished the handshake.
        XCTAssertNotNil(client.readLine(containing: "VERSION"))
        let bytes = try harness.record(connection.bytes)
        XCTAssertEqual(try waitForBytes(bytes, 11), Array("early bytes".utf8))
        connection.send(Array("early bytes".utf8))
        // The client's close_notify (its unwrap after the echo) ends `bytes` cleanly; ours answers it.
        XCTAssertNil(try bytes.waitForTermination().error)
        _ = try harness.record(connection.close()).waitForTermination()
        XCTAssertTrue(client.finish().text.contains("GOT early bytes"))
    }

    /// Runs the half-record client against a server whose connection is read, and returns how `bytes` ended.
    private func halfRecordEnd(mode: String) throws -> Event<[UInt8]> {
        let harness = LoopHarness(name: "tls-half-record")
        defer { XCTAssertTrue(harness.finish().isClean) }
        let server = try harness.record(TCPServer.serve(port: 0, tls: certificates.server(), on: harness.loop), label: "tls server")
        guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
        let client = try startPython(pythonHalfRecordClient, ["\(address.port)", certificates.caCertificate, mode])
        defer { _ = client.finish() }
        let connection = try waitForAccepted(server, 1)[0]
        let bytes = try harness.record(connection.bytes)
        let end = try bytes.waitForTermination()
        XCTAssertTrue(received(bytes).isEmpty, "no plaintext from half a record")
        return end
    }

    func testAPeerThatClosesInTheMiddleOfARecordFailsAsBadRecord() throws {
        let end = try halfRecordEnd(mode: "fin")
        XCTAssertEqual(end.error as? TLSError, TLSError.badRecord, "\(end)")
    }

    func testAPeerThatResetsInTheMiddleOfARecordFailsWithTheReset() throws {
        let end = try halfRecordEnd(mode: "reset")
        XCTAssertEqual(end.error as? UVError, UVError.connectionReset, "\(end)")
    }

    func testTLSOverAUnixSocketEchoesAndNamesTheServerByServerName() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/tls.sock"
            let harness = LoopHarness(name: "tls-unix")
            defer { XCTAssertTrue(harness.finish().isClean) }
            let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(allowHalfOpen: true),
                                                             tls: certificates.server(), on: harness.loop).map { event -> UnixSocket.Event in
                if case .accepted(let connection) = event {
                    connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                }
                return event
            }, label: "tls unix server")
            _ = try server.waitForValues(1)
            // A path names no host: without `serverName` the client refuses to guess.
            let unnamed = try harness.record(UnixSocket.connect(path: path, tls: certificates.client(), on: harness.loop))
            XCTAssertEqual(try unnamed.waitForTermination().error as? TLSError, TLSError.configuration)
            let connect = try harness.record(UnixSocket.connect(path: path, tls: certificates.client(serverName: "localhost"), on: harness.loop))
            let connection = try connect.waitForValues(1)[0]
            XCTAssertEqual(connection.tls?.peerCommonName, "localhost")
            let bytes = try harness.record(connection.bytes)
            let payload = bytePattern(300_000, seed: 3)
            connection.send(payload)
            XCTAssertEqual(try waitForBytes(bytes, payload.count), payload)
            XCTAssertNil(try harness.record(connection.close()).waitForTermination().error)
        }
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `TCPServer.serve(...tls:)` against real clients (Python's `ssl`, `openssl s_client`, plain
/// sockets sending what is not TLS) and against our own TLS client.
final class TLSServerTests: TLSTestCase {
    /// The shared echo server, half-open allowed (a client's FIN leaves the echo of what it sent to come).
    private func startEchoServer(_ harness: LoopHarness, tls: TLSServerConfiguration) throws
        -> (server: EventRecorder<TCPServer.Event>, port: Int, failures: Locked<[TLSError]>) {
        try startTLSEchoServer(harness, tls: tls, options: TCPOptions(allowHalfOpen: true))
    }

    /// Waits for the first handshake failure and returns it; it names the client's address.
    private func firstFailure(_ harness: LoopHarness, _ failures: Locked<[TLSError]>) throws -> TLSError {
        try harness.wait(for: "a handshake failure") { !failures.current.isEmpty }
        let error = failures.current[0]
        XCTAssertTrue(error.peer.contains("127.0.0.1"), "the error names the client: \(error)")
        return error
    }

    func testTheServerEchoesForAPythonClientOverTLS13() throws {
        withHarness { harness in
            let (server, port, failures) = try startEchoServer(harness, tls: certificates.server())
            let client = try startPython(pythonClient, ["\(port)", certificates.caCertificate, "echo me", "-", "-"])
            let output = client.finish()
            XCTAssertEqual(output.status, 0, output.text)
            XCTAssertTrue(output.text.contains("VERSION TLSv1.3"), output.text)
            XCTAssertTrue(output.text.contains("GOT echo me"), output.text)
            XCTAssertTrue(output.text.contains("DONE"), "the client's unwrap got our close_notify: \(output.text)")
            XCTAssertTrue(failures.current.isEmpty, "\(failures.current)")
            XCTAssertEqual(accepted(server).count, 1)
        }
    }

    func testOurClientAndServerTalkWithARequiredClientCertificateWhoseIdentityIsReadable() throws {
        withHarness { harness in
            let (server, port, failures) = try startEchoServer(harness, tls: certificates.server(clientCertificates: .required,
                                                                                                  applicationProtocols: ["echo/1"]))
            let connect = try harness.record(TCP.connect(host: "localhost", port: port,
                                                         tls: certificates.client(applicationProtocols: ["echo/1"], withCertificate: true),
                                                         options: TCPOptions(limits: StreamBufferLimits(pausesReading: false)), on: harness.loop))
            let connection = try connect.waitForValues(1)[0]
            let bytes = try harness.record(connection.bytes)
            // Past the high-water mark in one send, read back only as echoed: the client must keep reading.
            let payload = bytePattern(1 << 20, seed: 11)
            connection.send(payload)
            XCTAssertEqual(try waitForBytes(bytes, payload.count, timeout: .seconds(120)), payload, "a megabyte through both record layers")
            let serverSide = try waitForAccepted(server, 1)[0]
            XCTAssertEqual(serverSide.tls?.peerCommonName, "test-client", "the verified client identity")
            XCTAssertEqual(serverSide.tls?.peerSubject, "CN=test-client,O=ReactiveUV")
            XCTAssertEqual(serverSide.tls?.applicationProtocol, "echo/1")
            XCTAssertEqual(connection.tls?.applicationProtocol, "echo/1")
            // Half-close: our close_notify and FIN end the server's reading, which then closes its side.
            let closed = try harness.record(connection.close())
            XCTAssertNil(try closed.waitForTermination().error)
            XCTAssertTrue(failures.current.isEmpty, "\(failures.current)")
        }
    }

    func testAMissingRequiredClientCertificateFailsAsPeerSentNoCertificate() throws {
        withHarness { harness in
            let (server, port, failures) = try startEchoServer(harness, tls: certificates.server(clientCertificates: .required))
            let client = try startPython(pythonClient, ["\(port)", certificates.caCertificate, "hi", "-", "-"])
            let error = try firstFailure(harness, failures)
            XCTAssertEqual(error, TLSError.peerSentNoCertificate, "\(error)")
            let output = client.finish().text
            XCTAssertFalse(output.contains("GOT hi"), "the client got no answer: \(output)")
            XCTAssertTrue(accepted(server).isEmpty, "a client that failed the handshake is never sent")
        }
    }

    func testAnOptionalClientCertificateMayBeLeftOut() throws {
        withHarness { harness in
            let (server, port, _) = try startEchoServer(harness, tls: certificates.server(clientCertificates: .optional))
            let client = try startPython(pythonClient, ["\(port)", certificates.caCertificate, "no cert", "-", "-"])
            XCTAssertTrue(client.finish().text.contains("GOT no cert"))
            XCTAssertNil(try waitForAccepted(server, 1)[0].tls?.peerSubject, "no peer identity without a certificate")
        }
    }

    func testPlainBytesWhereAClientHelloBelongsFailAsBadRecord() throws {
        withHarness { harness in
            let (_, port, failures) = try startEchoServer(harness, tls: certificates.server())
            let client = try BlockingClient(port: port)
            defer { client.close() }
            try client.sendAll(Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
            let error = try firstFailure(harness, failures)
            XCTAssertEqual(error, TLSError.badRecord, "\(error)")
            let end = client.receiveUntilEnd()
            XCTAssertFalse(end.bytes.contains(Array("GET".utf8)[0]) && end.bytes.count > 40, "no echo of the plain bytes")
            XCTAssertNotEqual(end.end, .timedOut, "the connection was closed")
        }
    }

    func testATruncatedHandshakeFailsAsHandshakeTruncated() throws {
        withHarness { harness in
            let (_, port, failures) = try startEchoServer(harness, tls: certificates.server())
            let client = try BlockingClient(port: port)
            defer { client.close() }
            // A handshake record's header promising 512 bytes, and 4 of them; then FIN.
            try client.sendAll([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC])
            client.shutdownWrite()
            let error = try firstFailure(harness, failures)
            XCTAssertEqual(error, TLSError.handshakeTruncated, "\(error)")
        }
    }

    func testAHandshakeThatNeverFinishesIsClosedAtTheTimeout() throws {
        withHarness { harness in
            let timeout = Duration.milliseconds(300)
            let (_, port, failures) = try startEchoServer(harness, tls: certificates.server(handshakeTimeout: timeout))
            let began = ContinuousClock.now
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let end = client.receiveUntilEnd()
            XCTAssertEqual(end.end, .endOfFile, "closed by the server")
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - began, timeout, "not before the timeout")
            let error = try firstFailure(harness, failures)
            XCTAssertEqual(error, TLSError.handshakeTimeout, "\(error)")
        }
    }

    func testATLS10ClientFailsAsNoSharedProtocol() throws {
        withHarness { harness in
            let (_, port, failures) = try startEchoServer(harness, tls: certificates.server())
            // SECLEVEL=0 lets this OpenSSL offer TLS 1.0 at all; the server accepts 1.2 and 1.3 only.
            let client = try startTool("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1",
                                                             "-cipher", "DEFAULT@SECLEVEL=0"], input: "")
            let error = try firstFailure(harness, failures)
            XCTAssertEqual(error, TLSError.noSharedProtocol, "\(error)")
            _ = client.finish()
        }
    }

    func testAKeyThatDoesNotMatchTheCertificateIsRefusedAtConfiguration() throws {
        XCTAssertThrowsError(try certificates.server(key: certificates.otherKey)) { error in
            XCTAssertEqual(error as? TLSError, TLSError.configuration, "\(error)")
            XCTAssertTrue("\(error)".contains("does not match"), "\(error)")
        }
        XCTAssertThrowsError(try certificates.server(certificate: "/nonexistent/cert.pem")) { error in
            XCTAssertEqual(error as? TLSError, TLSError.configuration, "\(error)")
        }
    }

    func testPEMFromMemoryServesLikeFiles() throws {
        let certificate = try String(contentsOfFile: certificates.serverCertificate, encoding: .utf8)
        let key = try String(contentsOfFile: certificates.serverKey, encoding: .utf8)
        let tls = try TLSServerConfiguration(certificateChain: .pem(certificate), privateKey: .pem(key))
        withHarness { harness in
            let (_, port, _) = try startEchoServer(harness, tls: tls)
            let client = try startPython(pythonClient, ["\(port)", certificates.caCertificate, "from memory", "-", "-"])
            XCTAssertTrue(client.finish().text.contains("GOT from memory"))
        }
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `TCP.connect(host:port:tls:)` against real peers: Python's `ssl` module and `openssl s_server`.
final class TLSClientTests: TLSTestCase {
    /// A Python echo server with `certificate`; returns it and its port.
    private func pythonServer(certificate: String? = nil, key: String? = nil, clientCA: String = "-", alpn: String = "-") throws -> (ToolProcess, Int) {
        let server = try startPython(pythonEchoServer, [certificate ?? certificates.serverCertificate, key ?? certificates.serverKey, clientCA, alpn])
        guard let line = server.readLine(containing: "PORT"), let port = Int(line.split(separator: " ")[1].trimmingCharacters(in: .whitespacesAndNewlines)) else {
            server.stop()
            throw TestFailure("the Python server did not start: \(server.finish().text)")
        }
        return (server, port)
    }

    func testTheClientEchoesWithAPythonServerAgreesOnALPNAndClosesWithCloseNotify() throws {
        let (server, port) = try pythonServer(alpn: "h2,http/1.1")
        defer { server.stop() }
        withHarness { harness in
            let connect = try harness.record(TCP.connect(host: "localhost", port: port,
                                                         tls: certificates.client(applicationProtocols: ["http/1.1"]), on: harness.loop))
            let connection = try connect.waitForValues(1)[0]
            XCTAssertEqual(connection.tls?.protocolVersion, "TLSv1.3")
            XCTAssertEqual(connection.tls?.applicationProtocol, "http/1.1", "the one protocol both offered")
            XCTAssertEqual(connection.tls?.peerCommonName, "localhost", "the verified server certificate's name")
            let bytes = try harness.record(connection.bytes)
            let message = Array("hello over TLS".utf8)
            connection.send(message)
            XCTAssertEqual(try waitForBytes(bytes, message.count), message, "the plaintext came back through the records")
            let closed = try harness.record(connection.close())
            XCTAssertNil(try closed.waitForTermination().error)
            let output = server.finish().text
            XCTAssertTrue(output.contains("RECEIVED \(message.count)"), output)
            XCTAssertFalse(output.contains("READ-FAILED"), "the server read close_notify, not a bare EOF: \(output)")
            XCTAssertTrue(output.contains("DONE"), output)
        }
    }

    func testTheClientSendsAMegabyteThroughAnOpenSSLServerReversingLines() throws {
        let port = try unusedPort()
        let server = try startTool("/usr/bin/openssl", ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificates.serverCertificate,
                                                         "-key", certificates.serverKey, "-rev", "-naccept", "1"])
        defer { server.stop() }
        XCTAssertNotNil(server.readLine(containing: "ACCEPT"), "s_server is listening")
        withHarness { harness in
            // The client writes past the high-water mark before it reads the replies, to a peer that stops
            // reading while its replies wait: reading must not pause for the queue (see StreamBufferLimits).
            let options = TCPOptions(limits: StreamBufferLimits(pausesReading: false))
            let connect = try harness.record(TCP.connect(host: "127.0.0.1", port: port, tls: certificates.client(), options: options, on: harness.loop))
            let connection = try connect.waitForValues(1)[0]
            let bytes = try harness.record(connection.bytes)
            // Many lines, far more than one record or one socket buffer: each comes back reversed.
            let line = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
            let count = 30_000
            connection.send(Array((0..<count).map { _ in line + [10] }.joined()))
            let expected = line.reversed() + [10]
            let answer = try waitForBytes(bytes, count * expected.count, timeout: .seconds(120))
            XCTAssertEqual(answer.count, count * expected.count)
            XCTAssertEqual(Array(answer.prefix(expected.count)), Array(expected))
            XCTAssertEqual(Array(answer.suffix(expected.count)), Array(expected))
            connection.reset()
        }
    }

    /// Fails the connect and returns its error, which must be a `TLSError` naming the peer.
    private func handshakeError(certificate: String, key: String? = nil, tls: TLSClientConfiguration? = nil) throws -> TLSError {
        let (server, port) = try pythonServer(certificate: certificate, key: key)
        defer { server.stop() }
        var result: TLSError?
        withHarness { harness in
            let connect = try harness.record(TCP.connect(host: "localhost", port: port, tls: tls ?? certificates.client(), on: harness.loop))
            let end = try connect.waitForTermination()
            XCTAssertTrue(connect.values.isEmpty, "no connection is sent when the handshake fails")
            result = end.error as? TLSError
            XCTAssertNotNil(result, "\(end)")
        }
        let error = try XCTUnwrap(result)
        XCTAssertTrue(error.peer.contains("127.0.0.1"), "the error names the peer: \(error)")
        return error
    }

    func testAnExpiredServerCertificateFailsAsCertificateExpired() throws {
        let error = try handshakeError(certificate: certificates.expiredCertificate)
        XCTAssertEqual(error, TLSError.certificateExpired, "\(error)")
    }

    func testAServerCertificateForAnotherHostFailsAsHostnameMismatch() throws {
        let error = try handshakeError(certificate: certificates.wrongHostCertificate)
        XCTAssertEqual(error, TLSError.hostnameMismatch, "\(error)")
    }

    func testACertificateNoTrustedCAVouchesForFailsAsUnknownCA() throws {
        // The system's trust store (the default) does not hold the tests' CA.
        let error = try handshakeError(certificate: certificates.serverCertificate, tls: TLSClientConfiguration())
        XCTAssertEqual(error, TLSError.unknownCA, "\(error)")
        let selfSigned = try handshakeError(certificate: certificates.selfSignedCertificate, key: certificates.selfSignedKey)
        XCTAssertEqual(selfSigned, TLSError.unknownCA, "\(selfSigned)")
    }

    func testTLSErrorsMatchByKindInCatchAndCase() {
        let error: any Error = TLSError(.hostnameMismatch, message: "x", peer: "127.0.0.1:1")
        switch error {
        case TLSError.unknownCA: XCTFail("matched another kind")
        case TLSError.hostnameMismatch: break
        default: XCTFail("did not match its kind")
        }
        XCTAssertFalse(TLSError.badRecord ~= UVError(code: UVError.invalidArgumentCode))
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Client session resumption: a second connection to the same server resumes the first one's
/// session (TLS 1.3 ticket, TLS 1.2 session), against our server and `openssl s_server`.
final class TLSResumptionTests: TLSTestCase {
    /// Connects, sends `message`, reads `answer` (a TLS 1.3 server's tickets come before it), closes;
    /// returns what the handshake agreed on.
    private func exchange(_ harness: LoopHarness, host: String = "localhost", port: Int, tls: TLSClientConfiguration,
                          message: String = "resume me\n", answer: String? = nil) throws -> TLSSessionInfo {
        let connection = try harness.record(TCP.connect(host: host, port: port, tls: tls, on: harness.loop)).waitForValues(1)[0]
        let bytes = try harness.record(connection.bytes)
        connection.send(Array(message.utf8))
        let expected = Array((answer ?? message).utf8)
        XCTAssertEqual(try waitForBytes(bytes, expected.count), expected)
        XCTAssertNil(try harness.record(connection.close()).waitForTermination().error)
        return try XCTUnwrap(connection.tls)
    }


    func testASecondConnectionToOurServerResumesAndAThirdResumesWithTheNewTicket() throws {
        withHarness { harness in
            let port = try startTLSEchoServer(harness, tls: certificates.server()).port
            let tls = try certificates.client()
            let first = try exchange(harness, port: port, tls: tls)
            XCTAssertFalse(first.resumed, "nothing to resume yet")
            let second = try exchange(harness, port: port, tls: tls)
            XCTAssertTrue(second.resumed, "the first connection's ticket")
            XCTAssertEqual(second.protocolVersion, "TLSv1.3")
            XCTAssertEqual(second.peerCommonName, "localhost", "the identity verified when the session was made")
            XCTAssertTrue(try exchange(harness, port: port, tls: tls).resumed, "a ticket the resumed connection was sent")

            // Another server (the same port by another name) has nothing to resume; nor has a configuration that keeps nothing.
            XCTAssertFalse(try exchange(harness, host: "127.0.0.1", port: port, tls: tls).resumed)
            let forgetful = try TLSClientConfiguration(trustRoots: .certificates(.file(certificates.caCertificate)), resumesSessions: false)
            _ = try exchange(harness, port: port, tls: forgetful)
            XCTAssertFalse(try exchange(harness, port: port, tls: forgetful).resumed)
        }
    }

    /// `openssl s_server -rev` for three clients, TLS 1.3 or (with `-tls1_2`) TLS 1.2: the second
    /// resumes, and so does the third (a new ticket, or the TLS 1.2 session kept again).
    private func resumesAgainstOpenSSL(_ versionOption: [String], version: String) throws {
        let port = try unusedPort()
        let server = try startTool("/usr/bin/openssl", ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificates.serverCertificate,
                                                         "-key", certificates.serverKey, "-rev", "-naccept", "3"] + versionOption)
        defer { server.stop() }
        XCTAssertNotNil(server.readLine(containing: "ACCEPT"), "s_server is listening")
        withHarness { harness in
            let tls = try certificates.client()
            let first = try exchange(harness, port: port, tls: tls, message: "abc\n", answer: "cba\n")
            XCTAssertEqual(first.protocolVersion, version)
            XCTAssertFalse(first.resumed)
            let second = try exchange(harness, port: port, tls: tls, message: "abc\n", answer: "cba\n")
            XCTAssertTrue(second.resumed, "s_server resumed the session it gave the first connection")
            XCTAssertEqual(second.protocolVersion, version)
            XCTAssertTrue(try exchange(harness, port: port, tls: tls, message: "abc\n", answer: "cba\n").resumed)
        }
        XCTAssertEqual(server.finish().status, 0, "s_server served the three clients and ended")
    }

    func testASecondConnectionToAnOpenSSLServerResumesOverTLS13() throws {
        try resumesAgainstOpenSSL([], version: "TLSv1.3")
    }

    func testASecondConnectionToAnOpenSSLServerResumesOverTLS12() throws {
        try resumesAgainstOpenSSL(["-tls1_2"], version: "TLSv1.2")
    }
}

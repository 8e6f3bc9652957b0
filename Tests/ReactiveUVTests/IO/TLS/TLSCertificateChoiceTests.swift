import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Which certificate a TLS server presents: chosen by the client's SNI among several (checked with
/// `openssl s_client -servername` and our client), and replaced by `reloadCertificates` without a restart.
final class TLSCertificateChoiceTests: TLSTestCase {
    private var alpha: TLSCertificateChain { TLSCertificateChain(.file(certificates.alphaCertificate), privateKey: .file(certificates.serverKey)) }
    private var beta: TLSCertificateChain { TLSCertificateChain(.file(certificates.betaCertificate), privateKey: .file(certificates.serverKey)) }

    /// The subject line `openssl s_client -servername NAME` prints for the server's certificate ("subject=CN = alpha.test").
    private func subjectSeenByOpenSSL(port: Int, serverName: String?) throws -> String {
        let client = try startTool("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", certificates.caCertificate]
                                   + (serverName.map { ["-servername", $0] } ?? ["-noservername"]))
        defer { client.stop() }
        guard let line = client.readLine(containing: "subject=") else { throw TestFailure("s_client printed no subject: \(client.finish().text)") }
        return line.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Connects our client (trusting the test CA, checking `serverName`), echoes a line, and returns the connection's TLS info.
    private func echoWithOurClient(_ harness: LoopHarness, port: Int, serverName: String) throws -> TLSSessionInfo? {
        let tls = try TLSClientConfiguration(trustRoots: .certificates(.file(certificates.caCertificate)), serverName: serverName)
        let connection = try harness.record(TCP.connect(host: "127.0.0.1", port: port, tls: tls, on: harness.loop)).waitForValues(1)[0]
        let bytes = try harness.record(connection.bytes)
        let message = Array("hello \(serverName)".utf8)
        connection.send(message)
        XCTAssertEqual(try waitForBytes(bytes, message.count), message)
        XCTAssertNil(try harness.record(connection.close()).waitForTermination().error)
        return connection.tls
    }

    func testTheClientsSNIChoosesAmongSeveralCertificatesAndTheDefaultServesTheRest() throws {
        let tls = try TLSServerConfiguration(certificateChain: .file(certificates.serverCertificate), privateKey: .file(certificates.serverKey),
                                             serverNames: ["alpha.test": alpha, "*.beta.test": beta])
        withHarness { harness in
            let (_, port, failures) = try startTLSEchoServer(harness, tls: tls)
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: "alpha.test"), "subject=CN = alpha.test")
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: "ALPHA.test"), "subject=CN = alpha.test", "names match in any case")
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: "api.beta.test"), "subject=CN = beta.test", "the wildcard")
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: "a.b.beta.test"), "subject=CN = localhost", "a wildcard covers one label")
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: "other.test"), "subject=CN = localhost", "an unknown name: the default")
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: nil), "subject=CN = localhost", "no SNI: the default")
            XCTAssertEqual(try echoWithOurClient(harness, port: port, serverName: "alpha.test")?.peerCommonName, "alpha.test")
            XCTAssertEqual(try echoWithOurClient(harness, port: port, serverName: "x.beta.test")?.peerCommonName, "beta.test")
            XCTAssertTrue(failures.current.isEmpty, "\(failures.current)")
        }
    }

    func testWithoutADefaultAnUnknownServerNameFailsAsUnrecognizedNameOnBothEnds() throws {
        let tls = try TLSServerConfiguration(defaultCertificate: nil, serverNames: ["alpha.test": alpha])
        withHarness { harness in
            let (_, port, failures) = try startTLSEchoServer(harness, tls: tls)
            XCTAssertEqual(try echoWithOurClient(harness, port: port, serverName: "alpha.test")?.peerCommonName, "alpha.test")
            let client = try TLSClientConfiguration(trustRoots: .certificates(.file(certificates.caCertificate)), serverName: "other.test",
                                                    verifiesHostname: false)
            let refused = try harness.record(TCP.connect(host: "127.0.0.1", port: port, tls: client, on: harness.loop)).waitForTermination()
            XCTAssertEqual(refused.error as? TLSError, TLSError.unrecognizedName, "\(String(describing: refused.error))")
            try harness.wait(for: "the server's failure") { !failures.current.isEmpty }
            XCTAssertEqual(failures.current[0], TLSError.unrecognizedName, "\(failures.current)")
            XCTAssertTrue(failures.current[0].peer.contains("127.0.0.1"), "\(failures.current[0])")
        }
    }

    func testServerNamesThatAreNotHostNamesAndNoCertificateAtAllAreRefusedAtConfiguration() throws {
        for name in ["", "*", "a.*.test", "*.", ".test", "test."] {
            XCTAssertThrowsError(try TLSServerConfiguration(defaultCertificate: nil, serverNames: [name: alpha]), "\"\(name)\"") { error in
                XCTAssertEqual(error as? TLSError, TLSError.configuration, "\(error)")
            }
        }
        XCTAssertThrowsError(try TLSServerConfiguration(defaultCertificate: nil, serverNames: [:])) { error in
            XCTAssertTrue("\(error)".contains("no certificate"), "\(error)")
        }
        let mismatched = TLSCertificateChain(.file(certificates.alphaCertificate), privateKey: .file(certificates.otherKey))
        XCTAssertThrowsError(try TLSServerConfiguration(defaultCertificate: alpha, serverNames: ["beta.test": mismatched])) { error in
            XCTAssertTrue("\(error)".contains("does not match"), "\(error)")
        }
    }

    func testReloadingServesTheNewCertificateToNewClientsWhileAConnectionMadeBeforeKeepsWorking() throws {
        let tls = try TLSServerConfiguration(certificateChain: .file(certificates.alphaCertificate), privateKey: .file(certificates.serverKey))
        withHarness { harness in
            let (_, port, failures) = try startTLSEchoServer(harness, tls: tls)
            let client = try TLSClientConfiguration(trustRoots: .certificates(.file(certificates.caCertificate)), verifiesHostname: false)
            let before = try harness.record(TCP.connect(host: "127.0.0.1", port: port, tls: client, on: harness.loop)).waitForValues(1)[0]
            XCTAssertEqual(before.tls?.peerCommonName, "alpha.test")
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: nil), "subject=CN = alpha.test")

            try tls.reloadCertificates(defaultCertificate: beta)
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: nil), "subject=CN = beta.test", "a new client gets the new certificate")
            let after = try harness.record(TCP.connect(host: "127.0.0.1", port: port, tls: client, on: harness.loop)).waitForValues(1)[0]
            XCTAssertEqual(after.tls?.peerCommonName, "beta.test")

            // The connection made before the reload still carries records both ways.
            let bytes = try harness.record(before.bytes)
            let message = Array("still here".utf8)
            before.send(message)
            XCTAssertEqual(try waitForBytes(bytes, message.count), message)
            XCTAssertNil(try harness.record(before.close()).waitForTermination().error)
            XCTAssertNil(try harness.record(after.close()).waitForTermination().error)

            try tls.reloadCertificates(defaultCertificate: alpha, serverNames: ["x.beta.test": beta])
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: "x.beta.test"), "subject=CN = beta.test", "SNI names reload too")
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: nil), "subject=CN = alpha.test")
            XCTAssertTrue(failures.current.isEmpty, "\(failures.current)")
        }
    }

    func testAReloadWithAKeyThatDoesNotMatchThrowsAndTheOldCertificateStays() throws {
        let tls = try TLSServerConfiguration(certificateChain: .file(certificates.alphaCertificate), privateKey: .file(certificates.serverKey))
        XCTAssertThrowsError(try tls.reloadCertificates(defaultCertificate: TLSCertificateChain(.file(certificates.betaCertificate),
                                                                                                 privateKey: .file(certificates.otherKey)))) { error in
            XCTAssertEqual(error as? TLSError, TLSError.configuration, "\(error)")
            XCTAssertTrue("\(error)".contains("does not match"), "\(error)")
        }
        XCTAssertThrowsError(try tls.reloadCertificates(defaultCertificate: TLSCertificateChain(.file("/nonexistent/cert.pem"),
                                                                                                 privateKey: .file(certificates.serverKey))))
        withHarness { harness in
            let (_, port, _) = try startTLSEchoServer(harness, tls: tls)
            XCTAssertEqual(try subjectSeenByOpenSSL(port: port, serverName: nil), "subject=CN = alpha.test", "the old certificate is still served")
        }
    }
}

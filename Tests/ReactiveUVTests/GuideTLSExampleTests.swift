import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps docs/guides/tls.md's server and client examples identical to this code, and runs them together.
final class GuideTLSExampleTests: XCTestCase {
    static let guide = "docs/guides/tls.md"

    func testTheServerAndClientExamplesAreThisCodeAndTalk() async throws {
        try assertDocumentBlock(Self.guide, containing: "TLSServerConfiguration(", matches: "GUIDE-TLS-SERVER")
        try assertDocumentBlock(Self.guide, containing: "TLSClientConfiguration(", matches: "GUIDE-TLS-CLIENT")
        let certificates = try TLSTestCertificates.shared()
        let (certificatePath, keyPath, caPath) = (certificates.serverCertificate, certificates.serverKey, certificates.caCertificate)
        let port = try unusedPort()
        await withFinishedHarness(named: "guide-tls") { harness in
            let loop = harness.loop
            let server = try harness.onLoop {
                // GUIDE-TLS-SERVER-BEGIN
                let tls = try TLSServerConfiguration(certificateChain: .file(certificatePath), privateKey: .file(keyPath))
                let server = TCPServer.listen(port: port, tls: tls, on: loop, onHandshakeFailure: { error in
                    print("handshake failed:", error)
                }).subscribe(next: { connection in
                    connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                })
                // GUIDE-TLS-SERVER-END
                return server
            }
            defer { server.dispose() }
            // GUIDE-TLS-CLIENT-BEGIN
            let client = try TLSClientConfiguration(trustRoots: .certificates(.file(caPath)), applicationProtocols: ["echo/1"])
            let answer = try await TCP.withConnection(host: "localhost", port: port, tls: client, on: loop) { connection in
                connection.send(Array("hello".utf8))
                var answer: [UInt8] = []
                for try await chunk in connection.bytes.values {
                    answer += chunk
                    if answer.count >= 5 { break }
                }
                return answer
            }
            // GUIDE-TLS-CLIENT-END
            XCTAssertEqual(answer, Array("hello".utf8))
        }
    }
}

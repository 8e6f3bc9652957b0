import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `curl` (the system's, on its own TLS stack) as a peer of our TLS server: HTTPS to a server that
/// answers a minimal HTTP/1.1 response.
final class TLSCurlTests: TLSTestCase {
    /// curl from `scripts/install-deps`, or nil where it is genuinely absent.
    private static let curlPath: String? = ["/usr/bin/curl", "/usr/local/bin/curl"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// curl trusts the tests' CA, offers ALPN (h2 and http/1.1), gets http/1.1 (the one protocol the
    /// server speaks), sends its request, prints the body and exits 0; the server read a GET for /.
    func testCurlFetchesAPageOverHTTPSWithALPNHTTP11() throws {
        guard let curl = Self.curlPath else { throw XCTSkip("curl is not installed (scripts/install-deps installs it)") }
        let body = "hello from ReactiveUV over TLS\n"
        withHarness { harness in
            let requests = Locked<[String]>([])
            let events = TCPServer.serve(host: "127.0.0.1", port: 0, tls: try certificates.server(applicationProtocols: ["http/1.1"]), on: harness.loop)
                .map { event -> TCPServer.Event in
                    if case .accepted(let connection) = event { Self.answerOneRequest(on: connection, body: body, requests: requests) }
                    return event
                }
            let server = try harness.record(events, label: "https server")
            guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
            let output = try runTool(curl, ["--silent", "--show-error", "--verbose", "--cacert", certificates.caCertificate,
                                            "--write-out", "\nSTATUS %{http_code} HTTP %{http_version}\n",
                                            "https://localhost:\(address.port)/"])
            XCTAssertEqual(output.status, 0, output.text)
            // curl's verbose lines (standard error) share the pipe with the body: they may come between.
            let bodyAt = try XCTUnwrap(output.text.range(of: body), output.text)
            let statusAt = try XCTUnwrap(output.text.range(of: "STATUS 200 HTTP 1.1"), output.text)
            XCTAssertLessThan(bodyAt.lowerBound, statusAt.lowerBound, "the body, then curl's summary: \(output.text)")
            XCTAssertTrue(output.text.contains("ALPN: server accepted http/1.1"), "curl offered ALPN and we chose http/1.1: \(output.text)")
            XCTAssertTrue(output.text.contains("SSL certificate verify ok"), "curl verified our certificate against the CA: \(output.text)")
            let connection = try waitForAccepted(server, 1)[0]
            XCTAssertEqual(connection.tls?.applicationProtocol, "http/1.1")
            let request = try XCTUnwrap(requests.current.first)
            XCTAssertTrue(request.hasPrefix("GET / HTTP/1.1\r\n"), request)
            XCTAssertTrue(request.contains("\r\nHost: localhost:\(address.port)\r\n"), request)
        }
    }

    /// Reads up to the end of the request's head, records it, answers 200 with `body` and closes.
    private static func answerOneRequest(on connection: TCPConnection, body: String, requests: Locked<[String]>) {
        var head: [UInt8] = []
        var answered = false
        connection.bytes.subscribe(next: { chunk in
            guard !answered else { return }
            head += chunk
            guard let text = String(bytes: head, encoding: .utf8), text.contains("\r\n\r\n") else { return }
            answered = true
            requests.withLock { $0.append(text) }
            let response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            connection.send(Array(response.utf8))
            connection.close()
        })
    }
}

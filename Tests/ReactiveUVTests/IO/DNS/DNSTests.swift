import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `DNS.resolve` and `SocketAddress`: names and addresses through `uv_getaddrinfo`.
final class DNSTests: XCTestCase {
    func testResolvesLocalhostAndNumericHosts() throws {
        try checked { harness in
            let localhost = try harness.record(DNS.resolve("localhost", port: 80))
            XCTAssertTrue(try localhost.waitForTermination().isCompleted)
            let addresses = try XCTUnwrap(localhost.values.first)
            XCTAssertTrue(addresses.contains(try SocketAddress(host: "127.0.0.1", port: 80)), "\(addresses)")
            XCTAssertTrue(addresses.allSatisfy { $0.port == 80 })

            let numeric = try harness.record(DNS.resolve("::1", port: 5))
            XCTAssertEqual(try numeric.waitForValues(1), [[try SocketAddress(host: "::1", port: 5)]])
            XCTAssertEqual(numeric.values.first?.first?.description, "[::1]:5")
        }
    }

    func testAnUnknownHostIsAnError() throws {
        try checked { harness in
            let lookup = try harness.record(DNS.resolve("no-such-host.invalid"))
            let error = try XCTUnwrap(try lookup.waitForTermination().error as? UVError)
            XCTAssertTrue(error.name.hasPrefix("EAI_"), "\(error)")
            XCTAssertTrue(error.description.contains("no-such-host.invalid"), error.description)
        }
    }

    func testSocketAddressRejectsNamesAndBadPorts() {
        XCTAssertThrowsError(try SocketAddress(host: "localhost", port: 80)) { XCTAssertEqual(($0 as? UVError)?.name, "EINVAL") }
        XCTAssertThrowsError(try SocketAddress(host: "127.0.0.1", port: 65_536)) { XCTAssertEqual(($0 as? UVError)?.name, "EINVAL") }
        XCTAssertEqual(try SocketAddress(host: "10.1.2.3", port: 8080).description, "10.1.2.3:8080")
        XCTAssertEqual(try SocketAddress(host: "::1", port: 1).family, .ipv6)
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the README's "Matching errors" example compiling and runs it against real failures.
final class ReadmeErrorsExampleTests: XCTestCase {
    // README-ERRORS-EXAMPLE-BEGIN
    // A missing file is the defaults; any other error, a timeout included, goes to the caller.
    func readSettings(at path: String) throws -> [UInt8] {
        do {
            return try Files.read(path).first(timeout: .seconds(5)) ?? []
        } catch UVError.noSuchFile {
            return []
        }
    }

    // In a signal's error closure, switch on the same patterns.
    func explain(_ error: any Error) -> String {
        switch error {
        case UVError.addressInUse: return "the port is taken"
        case UVError.connectionRefused, UVError.connectionReset: return "the peer is gone"
        case UVError.nameNotFound: return "no such host"
        case let timeout as TimeoutError: return "gave up: \(timeout)"  // "timed out after 5.0 seconds waiting for first()"
        default: return "\(error)"
        }
    }
    // README-ERRORS-EXAMPLE-END

    func testTheReadmeErrorsExampleIsThisCodeAndWorks() throws {
        try assertReadmeBlock(containing: "func explain(", matches: "README-ERRORS-EXAMPLE")

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-errors-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let settings = directory.appendingPathComponent("settings").path
        XCTAssertEqual(try readSettings(at: settings), [], "a missing file is the defaults")
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: settings))
        XCTAssertEqual(try readSettings(at: settings), [1, 2, 3])
        XCTAssertThrowsError(try readSettings(at: directory.path), "a directory is not a missing file") { error in
            XCTAssertEqual(error as? UVError, .isDirectory)
        }

        LoopHarness.run { harness in
            let (_, port) = try startServer(harness)
            let second = try harness.record(TCPServer.listen(port: port))
            XCTAssertEqual(explain(try XCTUnwrap(try second.waitForTermination().error)), "the port is taken")
            let refused = try harness.record(TCP.connect(host: "127.0.0.1", port: try unusedPort()))
            XCTAssertEqual(explain(try XCTUnwrap(try refused.waitForTermination().error)), "the peer is gone")
        }
        XCTAssertThrowsError(try Signal<Int>.never.first(timeout: .milliseconds(10))) { error in
            XCTAssertEqual(explain(error), "gave up: timed out after 0.01 seconds waiting for first()")
        }
    }
}

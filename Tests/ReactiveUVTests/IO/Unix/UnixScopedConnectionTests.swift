import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

private struct BodyFailed: Error, Equatable {}

/// `UnixSocket.withConnection`: the connection is open while the body runs, closed
/// gracefully after it (the server reads what was sent, then EOF), reset when it throws.
final class UnixScopedConnectionTests: XCTestCase {
    private func withServer(_ test: (LoopHarness, String, EventRecorder<UnixSocket.Event>) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ruv-scoped-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/s.sock"
        let harness = LoopHarness(name: "scoped-unix")
        do {
            let server = try harness.record(UnixSocket.serve(path: path), label: "server")
            _ = try server.waitForValues(1)  // .listening
            try await test(harness, path, server)
        } catch {
            XCTFail("\(error)")
        }
        let report = harness.finish()
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testTheBodyTalksThenTheConnectionIsClosedAndTheServerReadsEOF() async throws {
        try await withServer { harness, path, server in
            var kept: UnixConnection?
            var serverBytes: EventRecorder<[UInt8]>?
            let answer = try await UnixSocket.withConnection(path: path, on: harness.loop) { connection -> Bool in
                kept = connection
                let accepted = try waitForAcceptedUnix(server, 1)[0]
                serverBytes = try harness.record(accepted.bytes, label: "server bytes")
                connection.send(Array("ping".utf8))
                return connection.isOpen
            }
            XCTAssertTrue(answer, "the connection is open inside the body")
            XCTAssertEqual(kept?.isOpen, false, "closed once withConnection returned")
            let bytes = try XCTUnwrap(serverBytes)
            XCTAssertTrue(try bytes.waitForTermination().isCompleted, "the server reads EOF after the bytes")
            XCTAssertEqual(bytes.values.flatMap { $0 }, Array("ping".utf8), "what the body queued was flushed before the close")
            accepted(unix: server).forEach { $0.close() }
        }
    }

    func testAThrowingBodyResetsTheConnectionAndRethrows() async throws {
        try await withServer { harness, path, server in
            var kept: UnixConnection?
            var serverBytes: EventRecorder<[UInt8]>?
            do {
                try await UnixSocket.withConnection(path: path, on: harness.loop) { connection in
                    kept = connection
                    serverBytes = try harness.record(waitForAcceptedUnix(server, 1)[0].bytes, label: "server bytes")
                    throw BodyFailed()
                }
                XCTFail("withConnection returned although its body threw")
            } catch let error as BodyFailed {
                XCTAssertEqual(error, BodyFailed())
            }
            XCTAssertEqual(kept?.isOpen, false, "the connection is gone once withConnection threw")
            _ = try XCTUnwrap(serverBytes).waitForTermination()
            accepted(unix: server).forEach { $0.close() }
        }
    }

    func testAMissingSocketIsThrownAsENOENT() async throws {
        try await withServer { harness, path, _ in
            let stale = path + ".missing"
            do {
                try await UnixSocket.withConnection(path: stale, on: harness.loop) { _ in XCTFail("the body ran without a connection") }
                XCTFail("connecting to a path with no socket succeeded")
            } catch let error as UVError {
                XCTAssertEqual(error.name, "ENOENT", "\(error)")
            }
        }
    }
}

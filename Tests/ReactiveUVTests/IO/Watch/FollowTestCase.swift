import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// What the follow tests share: a fresh directory per test with the followed `app.log` in it, writing
/// and appending to a file, waiting for a follower's log, and the harness's leak check.
class FollowTestCase: XCTestCase {
    var directory = ""
    var path: String { directory + "/app.log" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-follow-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func write(_ text: String, to file: String? = nil) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: file ?? path))
    }

    func append(_ text: String, to file: String? = nil) throws {
        try Self.append(text, to: file ?? path)
    }

    static func append(_ text: String, to file: String) throws {
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: file))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }

    func waitForLog(_ follow: EventRecorder<FileFollow.Event>, _ expected: [String],
                    file: StaticString = #filePath, line: UInt = #line) throws {
        try follow.wait(for: "the log \(expected)") { FollowLog.of($0) == expected || FollowLog.of($0).count > expected.count }
        XCTAssertEqual(FollowLog.of(follow.events), expected, file: file, line: line)
    }

    func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the example of docs/guides/watching.md compiling and runs it on a directory of the test's own.
final class GuideWatchingExampleTests: XCTestCase {
    // GUIDE-WATCHING-SETTLED-BEGIN
    /// Sends once a burst of changes under `directory` (its subdirectories included) has been quiet
    /// for 100 ms: the moment to rebuild, reload a configuration or rescan.
    func settled(_ directory: String) -> Signal<Void> {
        FileWatch.changes(at: directory, recursive: true)
            .debounce(.milliseconds(100))
            .mapReplace(())
    }
    // GUIDE-WATCHING-SETTLED-END

    /// A burst of writes, in the directory and in a subdirectory, is told once it has been quiet for
    /// 100 ms; a later write is told again; the watch stays open until disposed.
    func testTheSettledExampleIsThisCodeAndSendsAfterEachBurst() throws {
        try assertDocumentBlock("docs/guides/watching.md", containing: "func settled(", matches: "GUIDE-WATCHING-SETTLED")
        let directory = NSTemporaryDirectory() + "guide-watching-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func write(_ text: String, to name: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
        }
        let report = LoopHarness.run(timeout: .seconds(60)) { harness in
            let quiet = try harness.record(settled(directory))
            let burstBegan = ContinuousClock.now
            try write("a", to: "a.txt")
            try write("b", to: "sub/b.txt")
            try quiet.waitForValues(1, timeout: .seconds(60))
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - burstBegan, .milliseconds(100),
                                        "told only after 100 ms without a change")
            let toldForTheBurst = quiet.values.count
            try write("c", to: "sub/c.txt")
            try quiet.waitForValues(toldForTheBurst + 1, timeout: .seconds(60))
            XCTAssertNil(quiet.terminal, "the watch goes on")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    // GUIDE-WATCHING-LOGLINES-BEGIN
    /// The lines of the log at `path` from `start` (by default what is appended from now on), across
    /// rotation, `copytruncate`, and a delete and re-create; each line once, in order.
    func logLines(_ path: String, from start: FileFollow.Start = .end) -> Signal<String> {
        FileWatch.follow(at: path, from: start)
            .lines()
            .map { String(decoding: $0, as: UTF8.self) }
    }
    // GUIDE-WATCHING-LOGLINES-END

    /// From the start of an empty log: lines appended, then a rotation whose old file got one more line and
    /// whose new file holds one, then a truncation (to less than was read, or it could not be seen): each line
    /// once, in order.
    func testTheLogLinesExampleIsThisCodeAndFollowsARotation() throws {
        try assertDocumentBlock("docs/guides/watching.md", containing: "func logLines(", matches: "GUIDE-WATCHING-LOGLINES")
        let directory = NSTemporaryDirectory() + "guide-follow-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = directory + "/app.log"
        func append(_ text: String, to path: String) throws {
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(text.utf8))
        }
        try append("", to: log)
        let report = LoopHarness.run { harness in
            // From the beginning, so that a line appended before the follower opened the file is not skipped.
            let lines = try harness.record(logLines(log, from: .beginning))
            try append("one\n", to: log)
            try lines.waitForValues(1)
            try harness.onLoop {
                try append("two\n", to: log)
                try FileManager.default.moveItem(atPath: log, toPath: log + ".1")
                try append("three\n", to: log + ".1")
                try append("four, longer than five\n", to: log)
            }
            try lines.waitForValues(4)
            try harness.onLoop {
                XCTAssertEqual(truncate(log, 0), 0)
                try append("five\n", to: log)
            }
            try lines.waitForValues(5)
            XCTAssertEqual(lines.values, ["one", "two", "three", "four, longer than five", "five"])
            XCTAssertNil(lines.terminal)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

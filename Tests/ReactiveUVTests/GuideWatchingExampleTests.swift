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

    // GUIDE-WATCHING-MIRROR-BEGIN
    /// What a mirror of `directory` does for each change: a rename in the watched tree is one rename in
    /// the mirror (a directory's with all it holds), any other change a fresh copy of the name (or its
    /// removal, if nothing has it now), and lost events a full rescan.
    enum MirrorStep: Equatable, Sendable {
        case rename(from: String, to: String)
        case refresh(String)
        case rescan
    }

    func mirrorSteps(for directory: String) -> Signal<MirrorStep> {
        FileWatch.changes(at: directory, recursive: true).compactMap { event -> MirrorStep? in
            switch event.kind {
            case .moved: .rename(from: event.oldName ?? event.name, to: event.name)
            case .renamed, .changed: .refresh(event.name)
            case .eventsLost: .rescan
            case .notWatched: nil  // not readable: nothing to copy
            }
        }
    }
    // GUIDE-WATCHING-MIRROR-END

    /// A tree of 100 files renamed is one step for the mirror, not a copy of each file; a file made in it
    /// afterwards is refreshed under the new name. Each case ends with a sentinel file: the steps before
    /// its own are all the case caused.
    func testTheMirrorExampleIsThisCodeAndRenamesATreeInOneStep() throws {
        try assertDocumentBlock("docs/guides/watching.md", containing: "func mirrorSteps(", matches: "GUIDE-WATCHING-MIRROR")
        let directory = NSTemporaryDirectory() + "guide-mirror-" + UUID().uuidString
        for index in 0..<5 {
            try FileManager.default.createDirectory(atPath: directory + "/tree/d\(index)", withIntermediateDirectories: true)
            for file in 0..<20 { XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/tree/d\(index)/f\(file)", contents: nil)) }
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = LoopHarness.run(timeout: .seconds(60)) { harness in
            let steps = try harness.record(mirrorSteps(for: directory))
            // Written in place (`FileManager.createFile` writes a temporary file and renames it: a `.moved`).
            func make(_ name: String) throws { try Data().write(to: URL(fileURLWithPath: directory + "/" + name)) }
            func stepsBeforeSentinel(_ name: String, after index: Int) throws -> [MirrorStep] {
                try make(name)
                try steps.wait(for: "refresh \(name)") { $0.compactMap(\.value).dropFirst(index).contains(.refresh(name)) }
                return Array(steps.values.dropFirst(index).prefix { $0 != .refresh(name) })
            }
            XCTAssertEqual(rename(directory + "/tree", directory + "/kept"), 0)
            XCTAssertEqual(try stepsBeforeSentinel("sentinel-1", after: 0), [.rename(from: "tree", to: "kept")])
            let seen = steps.values.count
            try make("kept/d2/new")
            XCTAssertEqual(try stepsBeforeSentinel("sentinel-2", after: seen).first, .refresh("kept/d2/new"))
            XCTAssertNil(steps.terminal)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

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

import Foundation
import XCTest

/// Runs the built `filewatch` executable as a user would.
final class FileWatchSampleTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-filewatch-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// One line per event with the time, kind and name (a rename with both names); Ctrl-C exits 0.
    func testPrintsOneLinePerEventAndExitsZeroOnCtrlC() throws {
        let sample = try SampleProcess("filewatch", [directory, "--recursive"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "watching \(directory) recursively")
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: false)
        sample.waitForOutput(containing: " renamed sub\n")
        try Data("hi".utf8).write(to: URL(fileURLWithPath: directory + "/sub/note.txt"))
        sample.waitForOutput(containing: " renamed sub/note.txt\n")
        try FileManager.default.moveItem(atPath: directory + "/sub/note.txt", toPath: directory + "/sub/kept.txt")
        sample.waitForOutput(containing: " moved sub/note.txt -> sub/kept.txt\n")
        sample.process.interrupt()
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)

        let lines = sample.standardOutput.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.last, "interrupted by SIGINT; stopping")
        let events = lines.dropFirst().dropLast()
        XCTAssertFalse(events.isEmpty)
        for line in events {
            let parts = line.split(separator: " ")
            XCTAssertEqual(parts.count, parts[1] == "moved" ? 5 : 3, line)
            XCTAssertNotNil(parts[0].range(of: #"^\d\d:\d\d:\d\d\.\d\d\d$"#, options: .regularExpression), "time in '\(line)'")
            XCTAssertTrue(["renamed", "changed", "moved"].contains(String(parts[1])), line)
        }
        XCTAssertFalse(sample.standardOutput.contains(" renamed sub/kept.txt"), "the rename is one line: \(sample.standardOutput)")
        XCTAssertEqual(sample.standardError, "")
    }

    func testPollingReportsACreatedFile() throws {
        let file = directory + "/polled.txt"
        try Data("1".utf8).write(to: URL(fileURLWithPath: file))
        let sample = try SampleProcess("filewatch", [file, "--poll", "20ms"])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "polling every")
        // The first poll takes its baseline on the thread pool: grow the file until a change shows.
        var size = 1
        waitUntil("a growth to be reported") {
            if !sample.standardOutput.contains("changed polled.txt"), size < 4000 {
                size += 1
                try? Data(repeating: 65, count: size).write(to: URL(fileURLWithPath: file))
            }
            return sample.standardOutput.contains("changed polled.txt")
        }
        sample.waitForOutput(containing: "-> \(size))")
        try FileManager.default.removeItem(atPath: file)
        sample.waitForOutput(containing: "deleted polled.txt (was size \(size))")
        try Data("abc".utf8).write(to: URL(fileURLWithPath: file))
        sample.waitForOutput(containing: "created polled.txt (size 3)")
        sample.process.interrupt()
        XCTAssertEqual(sample.waitForExit(), 0)
    }

    func testAMissingPathPrintsAClearErrorAndExitsOne() throws {
        let missing = directory + "/does-not-exist"
        let sample = try SampleProcess("filewatch", [missing])
        XCTAssertEqual(sample.waitForExit(), 1)
        waitUntil("the error") { sample.standardError.contains("ENOENT") }
        XCTAssertTrue(sample.standardError.hasPrefix("filewatch: cannot watch \(missing): ENOENT: no such file or directory"),
                      sample.standardError)
        XCTAssertEqual(sample.standardOutput, "")
    }

    func testBadArgumentsPrintUsageAndExitTwo() throws {
        for arguments in [[], ["--poll"], [directory, "--poll", "soon"], [directory, "--recursive", "--poll", "1s"], ["a", "b"], ["--bogus"]] {
            let sample = try SampleProcess("filewatch", arguments)
            XCTAssertEqual(sample.waitForExit(), 2, "\(arguments)")
            waitUntil("usage for \(arguments)") { sample.standardError.contains("usage: filewatch") }
        }
    }
}

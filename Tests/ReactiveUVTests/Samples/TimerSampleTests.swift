import Foundation
import ReactiveUV
import XCTest

final class TimerSampleTests: XCTestCase {
    func testPrintsOneLinePerTickWithElapsedMillisecondsAndExitsZero() throws {
        let sample = try SampleProcess("timer", ["--interval", "40ms", "--count", "3"])
        XCTAssertEqual(sample.waitForExit(), 0)
        sample.waitForOutput(containing: "tick 3")
        let lines = sample.standardOutput.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 3, sample.standardOutput)
        for (index, line) in lines.enumerated() {
            let parts = line.split(separator: " ")
            XCTAssertEqual(parts.count, 5, line)
            XCTAssertEqual(parts.prefix(2).joined(separator: " "), "tick \(index + 1)")
            let milliseconds = Int(parts[3]) ?? -1
            XCTAssertGreaterThanOrEqual(milliseconds, 40 * (index + 1), "tick \(index + 1) came early: \(line)")
            XCTAssertEqual(parts[4], "ms")
        }
        XCTAssertEqual(sample.standardError, "")
    }

    func testCtrlCStopsCleanlyWithAMessage() throws {
        let sample = try SampleProcess("timer", ["--interval", "20ms", "--count", "0"])
        sample.waitForOutput(containing: "tick 2")
        sample.process.interrupt()  // SIGINT, as Ctrl-C sends
        XCTAssertEqual(sample.waitForExit(), 0)
        XCTAssertTrue(sample.standardOutput.contains("interrupted by SIGINT after"), sample.standardOutput)
    }

    func testBadArgumentsPrintUsageToStandardErrorAndFail() throws {
        for arguments in [["--interval"], ["--interval", "fast"], ["--count", "-1"], ["--bogus"], ["--interval", "0ms"]] {
            let sample = try SampleProcess("timer", arguments)
            let status = sample.waitForExit()
            XCTAssertEqual(status, 2, "\(arguments)")
            waitUntil("usage on stderr for \(arguments)") { sample.standardError.contains("usage: timer") }
            XCTAssertEqual(sample.standardOutput, "", "\(arguments)")
        }
    }
}

final class DebugSignalNamesTests: XCTestCase {
    func testNamesAreSetExplicitlyAndCheaply() {
        let signal = Signal<Int>.never
        XCTAssertEqual(signal.name, "", "no automatic names unless REACTIVEUV_DEBUG_SIGNALS is set")
        XCTAssertTrue(signal.named("ticks") === signal)
        XCTAssertEqual(signal.name, "ticks")
    }

    /// With the environment switch on, factories name their signals and every event is logged.
    func testTheEnvironmentSwitchLogsEveryEventWithTheSignalsName() throws {
        let sample = try SampleProcess("timer", ["--interval", "10ms", "--count", "2"],
                                       environment: ["REACTIVEUV_DEBUG_SIGNALS": "1"])
        XCTAssertEqual(sample.waitForExit(), 0)
        waitUntil("the event log") { sample.standardError.contains("next(1)") }
        XCTAssertTrue(sample.standardError.contains("ReactiveUV: [+interval(0.01 seconds)] next(0)"), sample.standardError)
        XCTAssertTrue(sample.standardError.contains("ReactiveUV: [+interval(0.01 seconds)] next(1)"), sample.standardError)
    }
}

/// The samples with no file descriptor left (`ulimit -n`): one line on standard error, exit status 1.
final class SamplesWithoutDescriptorsTests: XCTestCase {
    func testWithNoFileDescriptorLeftEachSamplePrintsOneLineAndExitsOne() throws {
        for (name, arguments) in [("timer", ["--count", "1"]), ("echo", ["--port", "0"]), ("filewatch", ["/tmp"])] {
            // 5: standard input, output and error, and two more; libuv's first setup needs three.
            for limit in [5, 6] {
                // LeakSanitizer's exit-time check needs descriptors of its own (under scripts/sanitize):
                // off for the sample, so its exit status and message are its own.
                let sample = try SampleProcess(name, arguments, environment: ["ASAN_OPTIONS": "detect_leaks=0"],
                                               openFileLimit: limit)
                XCTAssertEqual(sample.waitForExit(), 1, "\(name) at ulimit -n \(limit): \(sample.standardError)")
                waitUntil("\(name)'s message") { sample.standardError.hasSuffix("\n") }
                let lines = sample.standardError.split(separator: "\n")
                XCTAssertEqual(lines.count, 1, "\(name) at ulimit -n \(limit): \(sample.standardError)")
                XCTAssertTrue(lines.first?.hasPrefix("\(name): EventLoop '\(name)' could not start (EMFILE") == true,
                              "\(name) at ulimit -n \(limit): \(sample.standardError)")
            }
        }
    }
}

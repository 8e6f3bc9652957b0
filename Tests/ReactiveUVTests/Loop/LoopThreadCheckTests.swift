import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import XCTest

/// `assertInEventLoop`: loop-thread-only entry points trap in debug builds when called elsewhere.
final class LoopThreadCheckTests: XCTestCase {
    /// Set in the child process that `testOffLoopCallTrapsInDebugBuilds` starts.
    private static let probeVariable = "REACTIVEUV_OFF_LOOP_PROBE"

    func testTheCheckPassesOnTheLoopAndNamesLoopOperationAndCallerElsewhere() {
        let loop = EventLoop(name: "checked"), other = EventLoop(name: "other")
        defer { loop.shutdown(); other.shutdown() }
        XCTAssertEqual(onLoop(loop) { loop.loopThreadViolation("TCPStream.send") ?? "no violation" }, "no violation")
        let offLoop = loop.loopThreadViolation("TCPStream.send")
        XCTAssertEqual(offLoop, "TCPStream.send is loop thread only: it must run on loop 'checked''s thread, but was called on a thread that is no loop's (hop there with execute or enqueue first)")
        let fromOtherLoop = onLoop(other) { loop.loopThreadViolation("collectOpenHandles()") ?? "no violation" } ?? "no answer"
        XCTAssertTrue(fromOtherLoop.hasPrefix("collectOpenHandles() is loop thread only: it must run on loop 'checked''s thread, but was called on the thread of loop 'other'"),
                      fromOtherLoop)
        // Once the loop has closed its thread is gone: clean-up may run anywhere.
        loop.shutdown()
        XCTAssertNil(loop.loopThreadViolation("withUnsafeUVLoop(_:)"))
    }

    /// Runs `withUnsafeUVLoop` (loop thread only) from the test thread in a child process
    /// (this test again, with the probe variable set) and expects it to die with the message.
    func testOffLoopCallTrapsInDebugBuilds() throws {
        if ProcessInfo.processInfo.environment[Self.probeVariable] != nil {
            let loop = EventLoop(name: "probe")
            loop.withUnsafeUVLoop { _ in }
            loop.shutdown()
            return  // reached only when the check is missing: the parent sees a clean exit
        }
        #if !DEBUG
        throw XCTSkip("assertInEventLoop is compiled out of release builds")
        #else
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = ["ReactiveUVTests.LoopThreadCheckTests/testOffLoopCallTrapsInDebugBuilds"]
        // No crash backtracer in the child: it inherits the child's stderr and, under a sanitizer,
        // can outlive the child and hold the pipe open, so the read below would never see its end.
        child.environment = ProcessInfo.processInfo.environment.merging([Self.probeVariable: "1",
                                                                         "SWIFT_BACKTRACE": "enable=no"]) { $1 }
        let errors = Pipe()
        child.standardError = errors
        child.standardOutput = FileHandle.nullDevice
        try child.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        // A trap is a signal; under a sanitizer its runtime catches the signal and exits non-zero instead.
        let trapped = child.terminationReason == .uncaughtSignal || child.terminationStatus != 0
        XCTAssertTrue(trapped, "the child exited cleanly instead of trapping: \(message)")
        XCTAssertTrue(message.contains("withUnsafeUVLoop(_:) is loop thread only: it must run on loop 'probe''s thread, but was called on a thread that is no loop's"),
                      message)
        #endif
    }
}

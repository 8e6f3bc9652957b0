import CLibUV
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class LoopHarnessTests: XCTestCase {
    func testACleanTestIsReportedClean() throws {
        let harness = LoopHarness()
        let recorder = try harness.record(Signal<Void>.timer(after: .milliseconds(5)))
        XCTAssertEqual("\(try recorder.waitForTermination())", "completed")
        XCTAssertEqual(recorder.values.count, 1)
        let report = harness.finish()
        XCTAssertTrue(report.isClean, "\(report.problems)")
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertTrue(harness.loop.isShutDown)
    }

    /// The harness must catch a handle a test leaves open.
    func testTheHarnessCatchesADeliberatelyLeakedHandle() {
        let harness = LoopHarness()
        harness.loop.schedule(after: .seconds(3600)) {}  // never disposed: a leak
        let report = harness.finish()
        XCTAssertFalse(report.isClean)
        XCTAssertEqual(report.leakedHandles.map(\.kind), ["timer"])
        XCTAssertEqual(report.problems.count, 1)
        XCTAssertTrue(report.problems[0].contains("1 handle(s) still open at the end of the test"), report.problems[0])
        XCTAssertTrue(report.problems[0].contains("schedule(after: 3600"), report.problems[0])
        XCTAssertEqual(report.loopCloseResult, 0, "shutdown still closed it so the loop could close")
    }

    func testTheHarnessCatchesAHandleOpenedByOtherCode() throws {
        let harness = LoopHarness()
        let memory = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(UV_IDLE), alignment: 16)
        let address = UInt(bitPattern: memory)
        _ = try harness.onLoop {
            // Reach the raw loop through a handle of our own: the harness's loop is an EventLoop.
            let idle = UnsafeMutablePointer<uv_idle_t>(bitPattern: address)!
            let loopPointer = harness.loop.withUnsafeUVLoop { $0 }
            uv_idle_init(loopPointer.assumingMemoryBound(to: uv_loop_t.self), idle)
        }
        let report = harness.finish()
        XCTAssertEqual(report.leakedHandles.count, 1)
        XCTAssertEqual(report.leakedHandles.first?.kind, "idle")
        XCTAssertNil(report.leakedHandles.first?.label)
        memory.deallocate()
    }

    func testDisposingARecordedSubscriptionClosesItsHandle() throws {
        let harness = LoopHarness()
        let recorder = try harness.record(Signal<Int>.interval(.milliseconds(2)))
        XCTAssertEqual(try recorder.waitForValues(3).prefix(3), [0, 1, 2])
        XCTAssertEqual(try harness.loop.openHandles().map(\.kind), ["timer"])
        recorder.dispose()
        _ = try harness.onLoop {}
        XCTAssertEqual(try harness.loop.openHandles(), [])
        XCTAssertTrue(harness.finish().isClean)
    }

    func testWaitsThatTimeOutNameWhatTheyWaitedFor() throws {
        let harness = LoopHarness()
        let recorder = try harness.record(Signal<Int>.never, label: "the silent signal")
        XCTAssertThrowsError(try recorder.waitForValues(1, timeout: .milliseconds(30))) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("timed out after"), text)
            XCTAssertTrue(text.contains("1 value(s) from the silent signal"), text)
        }
        XCTAssertThrowsError(try harness.wait(for: "a flag that is never set", timeout: .milliseconds(20)) { false }) { error in
            XCTAssertTrue("\(error)".contains("a flag that is never set"))
        }
        XCTAssertTrue(harness.finish().isClean)
    }

    /// `waitFor` returns once a condition set on a loop holds, and at its deadline (not before)
    /// throws a `WaitTimeout` saying what it saw.
    func testWaitForReturnsWhenTheConditionHoldsAndOtherwiseTimesOutSayingWhatItSaw() throws {
        let harness = LoopHarness()
        let flag = Locked(false)
        harness.loop.execute { flag.withLock { $0 = true } }
        try waitFor("the flag", timeout: .seconds(10)) { flag.current }

        let start = SchedulerInstant.now
        XCTAssertThrowsError(try waitFor("a count of 3", timeout: .milliseconds(20), observed: "a count of 1") { false }) { error in
            XCTAssertEqual((error as? WaitTimeout)?.observed, "a count of 1")
            XCTAssertTrue("\(error)".hasSuffix("waiting for a count of 3; observed: a count of 1"), "\(error)")
        }
        XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(20), "it gave up before its deadline")
        XCTAssertTrue(harness.finish().isClean)
    }

    func testOnLoopRunsOnTheLoopThread() throws {
        let harness = LoopHarness(name: "probe")
        let name = try harness.onLoop { EventLoop.current?.name }
        XCTAssertEqual(name, "probe")
        struct Failure: Error {}
        XCTAssertThrowsError(try harness.onLoop { throw Failure() }) { XCTAssertTrue($0 is Failure) }
        XCTAssertTrue(harness.finish().isClean)
    }

    func testFinishIsIdempotent() {
        let harness = LoopHarness()
        let first = harness.finish(), second = harness.finish()
        XCTAssertEqual(first.loopCloseResult, second.loopCloseResult)
        XCTAssertTrue(second.isClean)
    }
}

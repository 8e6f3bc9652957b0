import CoreMetrics
import Dispatch
import Foundation
import MetricsTestKit
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Loop metrics: each test passes its own `TestMetrics` factory to its loop, so
/// nothing bootstraps the process-wide `MetricsSystem`.
final class LoopMetricsTests: XCTestCase {
    private func dimensions(_ loop: EventLoop, _ extra: [(String, String)] = []) -> [(String, String)] {
        [("loop", loop.name)] + extra
    }

    /// Keeps the calling thread busy (not sleeping: the loop is running code).
    private func spin(for duration: Duration) {
        let end = SchedulerInstant.now + duration
        while SchedulerInstant.now < end {}
    }

    private func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }

    func testMetricsAreOffUnlessAsked() throws {
        XCTAssertFalse(LoopMetrics.default.isEnabled)
        let loop = EventLoop(name: "no-metrics")
        XCTAssertFalse(loop.reportsMetrics)
        XCTAssertTrue(try loop.openHandles().isEmpty)
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
    }

    func testALoopBlockedByALongClosureShowsThatLag() throws {
        let metrics = TestMetrics()
        let interval = Duration.milliseconds(20)
        let block = Duration.milliseconds(300)
        LoopHarness.run(metrics: .enabled(interval: interval, factory: metrics)) { harness in
            let lag = try metrics.expectTimer(LoopMetrics.lagLabel, dimensions(harness.loop))
            try harness.wait(for: "three lag samples of an idle loop") { lag.values.count >= 3 }
            XCTAssertLessThan(lag.values.min()!, nanoseconds(.milliseconds(100)), "an idle loop fires its probe about on time")
            try harness.onLoop { self.spin(for: block) }
            // The probe can have been armed at most one interval before the block began.
            let floor = nanoseconds(block - interval)
            try harness.wait(for: "a lag sample of at least \(block - interval)") {
                lag.values.contains { $0 >= floor }
            }
        }
    }

    func testTheBusyRatioRisesWhenTheLoopIsBusy() throws {
        let metrics = TestMetrics()
        LoopHarness.run(metrics: .enabled(interval: .milliseconds(50), factory: metrics)) { harness in
            let busy = try metrics.expectGauge(LoopMetrics.busyRatioLabel, dimensions(harness.loop))
            let idle = try metrics.expectTimer(LoopMetrics.idleTimeLabel, dimensions(harness.loop))
            try harness.wait(for: "three samples of an idle loop") { busy.values.count >= 3 && idle.values.count >= 3 }
            XCTAssertLessThan(busy.values.min()!, 0.5, "an idle loop spends most of its time waiting: \(busy.values)")
            XCTAssertGreaterThan(idle.values.max()!, nanoseconds(.milliseconds(25)), "\(idle.values)")
            let seen = busy.values.count
            try harness.onLoop { self.spin(for: .milliseconds(300)) }
            try harness.wait(for: "a sample with a busy ratio of at least 0.7") {
                busy.values.dropFirst(seen).contains { $0 >= 0.7 }
            }
            XCTAssertTrue(busy.values.allSatisfy { (0...1).contains($0) }, "\(busy.values)")
        }
    }

    func testHandleCountsByTypeFollowOpenedAndClosedHandles() throws {
        let metrics = TestMetrics()
        let directory = NSTemporaryDirectory() + "reactiveuv-metrics-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        LoopHarness.run(metrics: .enabled(interval: .milliseconds(10), factory: metrics)) { harness in
            let loop = harness.loop
            func count(_ type: String) -> Double? {
                (try? metrics.expectGauge(LoopMetrics.handlesLabel, dimensions(loop, [("type", type)])))?.lastValue
            }
            let server = try harness.record(TCPServer.listen(port: 0))
            let watch = try harness.record(FileWatch.changes(at: directory))
            let timer = loop.schedule(after: .seconds(3600)) {}
            // A file watch reads its loop's inotify instance through a uv_poll handle.
            try harness.wait(for: "one tcp, one poll and one timer") {
                count("tcp") == 1 && count("poll") == 1 && count("timer") == 1
            }
            XCTAssertNil(count("async"), "the loop's own handles are not counted")
            XCTAssertNil(count("idle"), "the loop's own handles are not counted")
            server.dispose()
            watch.dispose()
            timer?.dispose()
            try harness.wait(for: "the counts back to 0") {
                count("tcp") == 0 && count("poll") == 0 && count("timer") == 0
            }
        }
    }

    func testQueuedWorkIsSeenWhileTheLoopIsBlocked() throws {
        let metrics = TestMetrics()
        let interval = Duration.milliseconds(10)
        LoopHarness.run(metrics: .enabled(interval: interval, factory: metrics)) { harness in
            let loop = harness.loop
            let queued = try metrics.expectGauge(LoopMetrics.queuedWorkLabel, dimensions(loop))
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            loop.execute {
                started.signal()
                _ = release.wait(timeout: .now() + 10)
            }
            XCTAssertEqual(started.wait(timeout: .now() + 10), .success)
            let blockedAt = SchedulerInstant.now
            let ran = Locked(0)
            for _ in 0..<50 { loop.execute { ran.withLock { $0 += 1 } } }
            try harness.wait(for: "50 items queued behind the blocked loop") { loop.queuedWorkCount == 50 }
            // When the loop resumes it runs its timers before it takes the next batch, so an
            // overdue probe samples the queue first: wait until the probe is overdue.
            try harness.wait(for: "the probe to be due") { SchedulerInstant.now >= blockedAt + interval * 3 }
            release.signal()
            try harness.wait(for: "a queued-work sample of 50") { queued.values.contains(50) }
            try harness.wait(for: "the 50 items to run") { ran.current == 50 }
            XCTAssertEqual(loop.queuedWorkCount, 0)
            try harness.wait(for: "a queued-work sample of 0") { queued.lastValue == 0 }
        }
    }

    func testShutdownDestroysTheMetricsAndClosesCleanly() throws {
        let metrics = TestMetrics()
        let loop = EventLoop(name: "metrics-shutdown", metrics: .enabled(interval: .milliseconds(5), factory: metrics))
        XCTAssertTrue(loop.reportsMetrics)
        let lag = try metrics.expectTimer(LoopMetrics.lagLabel, dimensions(loop))
        waitUntil("a lag sample") { !lag.values.isEmpty }
        XCTAssertTrue(try loop.openHandles().isEmpty, "the probe is the loop's own handle")
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        XCTAssertThrowsError(try metrics.expectTimer(LoopMetrics.lagLabel, dimensions(loop)))
        XCTAssertTrue(metrics.timers.isEmpty && metrics.recorders.isEmpty)
    }

    func testTheGlobalDefaultAppliesToLoopsMadeAfterIt() throws {
        let metrics = TestMetrics()
        LoopMetrics.default = .enabled(interval: .milliseconds(5), factory: metrics)
        let loop = EventLoop(name: "metrics-by-default")
        let off = EventLoop(name: "metrics-explicitly-off", metrics: .disabled)
        LoopMetrics.default = .disabled
        XCTAssertTrue(loop.reportsMetrics)
        XCTAssertFalse(off.reportsMetrics)
        let lag = try metrics.expectTimer(LoopMetrics.lagLabel, dimensions(loop))
        waitUntil("a lag sample") { !lag.values.isEmpty }
        XCTAssertTrue(metrics.timers(label: LoopMetrics.lagLabel).allSatisfy { $0.dimensions.first?.1 == loop.name })
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        XCTAssertEqual(try off.tryShutdown().loopCloseResult, 0)
    }

    func testEachLoopOfAGroupReportsUnderItsOwnName() throws {
        let metrics = TestMetrics()
        let group = EventLoopGroup(loopCount: 2, name: "metrics-group", metrics: .enabled(interval: .milliseconds(5), factory: metrics))
        for loop in group.loops {
            let lag = try metrics.expectTimer(LoopMetrics.lagLabel, dimensions(loop))
            waitUntil("a lag sample from \(loop.name)") { !lag.values.isEmpty }
        }
        XCTAssertEqual(metrics.timers(label: LoopMetrics.lagLabel).count, 2)
        group.shutdown()
        XCTAssertTrue(metrics.timers.isEmpty && metrics.recorders.isEmpty, "destroyed at shutdown")
    }

    /// The probe does not keep an owner-thread loop alive: run() still returns when the work is done.
    func testAnOwnerThreadLoopStillReturnsFromRun() throws {
        let metrics = TestMetrics()
        let samples = Locked(0)
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "owner-metrics",
                                                 metrics: .enabled(interval: .milliseconds(5), factory: metrics))
            // Queued, so the timer starts inside run(), after the probe was armed for 5 ms.
            loop.execute { Signal<Void>.timer(after: .milliseconds(60)).subscribeNext { _ in } }
            loop.run()
            let lag = try? metrics.expectTimer(LoopMetrics.lagLabel, [("loop", "owner-metrics")])
            samples.withLock { $0 = lag?.values.count ?? 0 }
            loop.shutdown()
        }
        XCTAssertGreaterThanOrEqual(samples.current, 1, "the probe fired while run() ran")
        XCTAssertTrue(metrics.timers.isEmpty, "destroyed at shutdown")
    }

    func testIntervalsRoundUpToWholeMilliseconds() {
        XCTAssertEqual(LoopMetrics.enabled(interval: .microseconds(10)).interval, .milliseconds(1))
        XCTAssertEqual(LoopMetrics.enabled(interval: .microseconds(1500)).interval, .milliseconds(2))
        XCTAssertEqual(LoopMetrics.enabled().interval, .seconds(1))
        XCTAssertNil(LoopMetrics.disabled.interval)
        XCTAssertFalse(LoopMetrics.disabled.isEnabled)
    }
}

import CLibUV
import CoreMetrics
import Dispatch
import Foundation
import MetricsTestKit
@testable import ReactiveUV
@testable import ReactiveUVCore
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

    /// The lag is measured from the probe's due time (the time libuv was told to fire it),
    /// not from the start of the interval: each sample is at most the clock when it was
    /// recorded minus that due time, whatever the machine's load. A blocked loop shows its block.
    func testALoopBlockedByALongClosureShowsThatLag() throws {
        let metrics = ProbeWatchingMetrics()
        let interval = Duration.milliseconds(20)
        let block = Duration.milliseconds(300)
        LoopHarness.run(metrics: .enabled(interval: interval, factory: metrics)) { harness in
            let lag = try metrics.recorded.expectTimer(LoopMetrics.lagLabel, dimensions(harness.loop))
            try harness.wait(for: "three lag samples of an idle loop whose due time is known") {
                metrics.samples.filter { $0.due != nil }.count >= 3
            }
            try harness.onLoop { self.spin(for: block) }
            // The probe can have been armed at most one interval before the block began.
            let floor = nanoseconds(block - interval)
            try harness.wait(for: "a lag sample of at least \(block - interval)") {
                lag.values.contains { $0 >= floor }
            }
            let samples = metrics.samples
            XCTAssertEqual(samples.map(\.lag), Array(lag.values.prefix(samples.count)), "the watcher saw every lag sample")
            XCTAssertTrue(samples.allSatisfy { $0.lag >= 0 }, "\(samples.map(\.lag))")
            // Counted from the interval's start instead, an idle sample would exceed this by about 20 ms.
            for (index, sample) in samples.enumerated() {
                guard let due = sample.due else { continue }
                let sinceDue = sample.recordedAt > due ? Int64(sample.recordedAt - due) : 0
                XCTAssertLessThanOrEqual(sample.lag, sinceDue,
                                         "sample \(index): lag \(sample.lag) ns is more than the \(sinceDue) ns since the probe was due")
            }
        }
    }

    /// The busy ratio is the part of each interval not spent waiting: for every sample it is at
    /// most 1 - idle / (an upper bound of the interval's length, read on the loop thread), so an
    /// idle loop's ratio is low whatever the machine's load; a loop kept busy reports a high one.
    func testTheBusyRatioRisesWhenTheLoopIsBusy() throws {
        let metrics = ProbeWatchingMetrics()
        LoopHarness.run(metrics: .enabled(interval: .milliseconds(50), factory: metrics)) { harness in
            let busy = try metrics.recorded.expectGauge(LoopMetrics.busyRatioLabel, dimensions(harness.loop))
            let idle = try metrics.recorded.expectTimer(LoopMetrics.idleTimeLabel, dimensions(harness.loop))
            try harness.wait(for: "three samples of an idle loop") { metrics.samples.filter { $0.busy != nil }.count >= 3 }
            XCTAssertGreaterThan(idle.values.max()!, nanoseconds(.milliseconds(25)), "\(idle.values)")
            let seen = busy.values.count
            try harness.onLoop { self.spin(for: .milliseconds(300)) }
            try harness.wait(for: "a sample with a busy ratio of at least 0.7") {
                busy.values.dropFirst(seen).contains { $0 >= 0.7 }
            }
            XCTAssertTrue(busy.values.allSatisfy { (0...1).contains($0) }, "\(busy.values)")
            // A sample's idle time and ratio are filled in on the loop just after its gauge is recorded.
            try harness.wait(for: "four samples with their idle time and ratio") {
                metrics.samples.filter { $0.idle != nil && $0.busy != nil }.count >= 4
            }
            let samples = metrics.samples
            var checked = 0
            for (index, (previous, sample)) in zip(samples, samples.dropFirst()).enumerated() {
                guard let idleTime = sample.idle, let ratio = sample.busy else { continue }
                // The interval ran from the previous firing's clock reading (not before that
                // iteration's loop time) to this one's (not after the lag was recorded).
                let longest = Double(sample.recordedAt - previous.loopTime)
                let ceiling = 1 - Double(idleTime) / longest
                XCTAssertLessThanOrEqual(ratio, ceiling + 1e-9,
                                         "sample \(index + 1): busy ratio \(ratio) with \(idleTime) ns idle in at most \(Int(longest)) ns")
                checked += 1
            }
            XCTAssertGreaterThanOrEqual(checked, 3, "samples with their idle time and ratio: \(samples)")
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

/// One firing of a loop's metrics probe, as seen on the loop thread.
struct ProbeSample: Sendable {
    /// The lag recorded (ns).
    var lag: Int64
    /// The clock just after the lag was recorded: at or after the probe's own reading.
    var recordedAt: UInt64
    /// The loop's time (`uv_now`, ns) of that iteration: at or before the probe's own reading.
    var loopTime: UInt64
    /// When libuv was told to fire the probe (ns), read after the previous firing re-armed it; nil if unknown.
    var due: UInt64?
    /// The idle time and busy ratio recorded in the same firing (read after it).
    var idle: Int64?
    var busy: Double?
}

/// A metrics factory that records into `TestMetrics` and also watches each firing of the
/// probe from its loop thread: when the lag is recorded (the first metric of a firing) it
/// notes the clock and the loop's time, then queues a look (run after the firing, in the same
/// loop iteration) at the firing's other metrics and at the re-armed probe's due time.
final class ProbeWatchingMetrics: MetricsFactory, Sendable {
    let recorded = TestMetrics()
    private let state = Locked<(samples: [ProbeSample], nextDue: UInt64?)>(([], nil))

    /// Every firing seen so far, in order.
    var samples: [ProbeSample] { state.withLock { $0.samples } }

    fileprivate func lagRecorded(_ lag: Int64) {
        let recordedAt = SchedulerInstant.now.nanoseconds
        guard let loop = EventLoop.current else { return }
        let loopTime = uv_now(loop.uvLoop) * 1_000_000
        let index = state.withLock { state in
            state.samples.append(ProbeSample(lag: lag, recordedAt: recordedAt, loopTime: loopTime, due: state.nextDue))
            state.nextDue = nil
            return state.samples.count - 1
        }
        loop.execute { [self] in
            let dimensions = [("loop", loop.name)]
            let idle = (try? recorded.expectTimer(LoopMetrics.idleTimeLabel, dimensions))?.lastValue
            let busy = (try? recorded.expectGauge(LoopMetrics.busyRatioLabel, dimensions))?.lastValue
            var due: UInt64?
            if let probe = loop.metricsProbe {
                // 0 means "due now or overdue": the exact due time is then unknown.
                let dueIn = uv_timer_get_due_in(probe)
                if dueIn > 0 { due = (uv_now(loop.uvLoop) + dueIn) * 1_000_000 }
            }
            state.withLock { state in
                // The due time read here is the armed probe's: it belongs to whichever firing comes next.
                state.nextDue = due
                // The other metrics are this firing's only if no later firing has been recorded since.
                guard state.samples.count == index + 1 else { return }
                state.samples[index].idle = idle
                state.samples[index].busy = busy
            }
        }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        recorded.makeCounter(label: label, dimensions: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        recorded.makeFloatingPointCounter(label: label, dimensions: dimensions)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        recorded.makeMeter(label: label, dimensions: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        recorded.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let timer = recorded.makeTimer(label: label, dimensions: dimensions)
        return label == LoopMetrics.lagLabel ? WatchedLagTimer(timer, watcher: self) : timer
    }

    func destroyCounter(_ handler: any CounterHandler) { recorded.destroyCounter(handler) }
    func destroyMeter(_ handler: any MeterHandler) { recorded.destroyMeter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { recorded.destroyFloatingPointCounter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { recorded.destroyRecorder(handler) }
    func destroyTimer(_ handler: any TimerHandler) {
        recorded.destroyTimer((handler as? WatchedLagTimer)?.recorded ?? handler)
    }
}

/// The lag timer of a `ProbeWatchingMetrics`: records, then tells the watcher.
private final class WatchedLagTimer: TimerHandler, Sendable {
    let recorded: any TimerHandler
    private let watcher: ProbeWatchingMetrics

    init(_ recorded: any TimerHandler, watcher: ProbeWatchingMetrics) {
        self.recorded = recorded
        self.watcher = watcher
    }

    func recordNanoseconds(_ duration: Int64) {
        recorded.recordNanoseconds(duration)
        watcher.lagRecorded(duration)
    }
}

internal import CLibUV
import CoreMetrics

/// Whether, and how, an `EventLoop` reports metrics through swift-metrics.
///
/// Off by default: pass `.enabled(interval:)` to `EventLoop(name:metrics:)`, or set
/// `LoopMetrics.default` for loops made afterwards. An enabled loop turns on libuv's idle-time
/// metric and samples every `interval` from an unreferenced timer, with the dimension `("loop", name)`:
///
/// - `reactiveuv_loop_lag` (Timer, ns): how late the probe fired (libuv's millisecond timers add noise);
/// - `reactiveuv_loop_idle_time` (Timer, ns): time spent waiting for events since the last sample;
/// - `reactiveuv_loop_busy_ratio` (Gauge, 0...1): the fraction of the interval spent running callbacks;
/// - `reactiveuv_loop_queued_work` (Gauge): `EventLoop.queuedWorkCount`;
/// - `reactiveuv_loop_handles` (Gauge, plus `("type", kind)`): open handles by libuv type, the
///   loop's own excluded, `schedule(after:)` work counted as "timer"; a type all closed reports 0.
///
/// A disabled loop has no probe and no metric objects; shutdown destroys them.
///
/// Thread rule: a value type; safe from any thread.
public struct LoopMetrics: Sendable {
    /// The time between samples; nil when metrics are off.
    ///
    /// Thread rule: safe from any thread.
    public let interval: Duration?
    /// The factory the metrics are made with; nil means `MetricsSystem.factory`.
    ///
    /// Thread rule: safe from any thread.
    public let factory: (any MetricsFactory)?

    /// The label of the lag Timer.
    ///
    /// Thread rule: safe from any thread.
    public static let lagLabel = "reactiveuv_loop_lag"
    /// The label of the idle-time Timer.
    ///
    /// Thread rule: safe from any thread.
    public static let idleTimeLabel = "reactiveuv_loop_idle_time"
    /// The label of the busy-ratio Gauge.
    ///
    /// Thread rule: safe from any thread.
    public static let busyRatioLabel = "reactiveuv_loop_busy_ratio"
    /// The label of the queued-work Gauge.
    ///
    /// Thread rule: safe from any thread.
    public static let queuedWorkLabel = "reactiveuv_loop_queued_work"
    /// The label of the open-handles Gauge (one per `("type", kind)`).
    ///
    /// Thread rule: safe from any thread.
    public static let handlesLabel = "reactiveuv_loop_handles"

    /// No metrics: the default.
    ///
    /// Thread rule: safe from any thread.
    public static let disabled = LoopMetrics(interval: nil, factory: nil)

    /// Metrics sampled every `interval`.
    ///
    /// - Parameters:
    ///   - interval: The time between samples, rounded up to whole milliseconds (at least 1).
    ///   - factory: The factory to make the metrics with; nil uses `MetricsSystem.factory` when the loop is made.
    ///
    /// Thread rule: safe from any thread.
    public static func enabled(interval: Duration = .seconds(1), factory: (any MetricsFactory)? = nil) -> LoopMetrics {
        let (seconds, attoseconds) = interval.components
        let nanoseconds = UInt64(clamping: max(0, seconds)) &* 1_000_000_000 &+ UInt64(clamping: max(0, attoseconds) / 1_000_000_000)
        let milliseconds = max(1, (nanoseconds + 999_999) / 1_000_000)
        return LoopMetrics(interval: .milliseconds(Int64(clamping: milliseconds)), factory: factory)
    }

    /// Whether metrics are on.
    ///
    /// Thread rule: safe from any thread.
    public var isEnabled: Bool { interval != nil }

    /// What loops made without a `metrics:` argument use (initially `.disabled`); a loop reads it
    /// once, when made, so set it early in `main`.
    ///
    /// Thread rule: safe from any thread.
    public static var `default`: LoopMetrics {
        get { defaultStorage.withLock { $0 } }
        set { defaultStorage.withLock { $0 = newValue } }
    }

    private static let defaultStorage = LockedValue(LoopMetrics.disabled)

    /// The interval in whole milliseconds (`enabled` rounded it), for libuv.
    var intervalMilliseconds: UInt64 {
        guard let interval else { return 0 }
        let (seconds, attoseconds) = interval.components
        return max(1, UInt64(clamping: seconds) &* 1000 &+ UInt64(clamping: attoseconds / 1_000_000_000_000_000))
    }
}

/// The metric objects of one loop and the interval being measured. Made before the loop thread
/// starts, then touched only on it.
final class LoopMetricsSampler {
    private enum State {
        /// Not armed (a loop not running yet, or an owner-thread loop outside `run()`).
        case idle
        /// The interval began at `since` (monotonic ns) with libuv's cumulative idle time at
        /// `idleAtStart`; the probe is due at `due`.
        case measuring(since: UInt64, idleAtStart: UInt64, due: UInt64)
        /// Destroyed at shutdown: nothing more is recorded.
        case destroyed
    }

    let intervalMilliseconds: UInt64
    private let factory: any MetricsFactory
    private let dimensions: [(String, String)]
    private let lag: CoreMetrics.Timer
    private let idleTime: CoreMetrics.Timer
    private let busyRatio: Gauge
    private let queuedWork: Gauge
    /// One gauge per handle type seen so far. Loop thread only.
    private var handleGauges: [(kind: String, gauge: Gauge)] = []
    private var state = State.idle

    init(loopName: String, configuration: LoopMetrics) {
        intervalMilliseconds = configuration.intervalMilliseconds
        factory = configuration.factory ?? MetricsSystem.factory
        dimensions = [("loop", loopName)]
        lag = CoreMetrics.Timer(label: LoopMetrics.lagLabel, dimensions: dimensions, factory: factory)
        idleTime = CoreMetrics.Timer(label: LoopMetrics.idleTimeLabel, dimensions: dimensions, factory: factory)
        busyRatio = Gauge(label: LoopMetrics.busyRatioLabel, dimensions: dimensions, factory: factory)
        queuedWork = Gauge(label: LoopMetrics.queuedWorkLabel, dimensions: dimensions, factory: factory)
    }

    var isLive: Bool {
        if case .destroyed = state { return false }
        return true
    }

    /// Starts an interval at `now` whose probe is due at `due`; false once destroyed.
    func begin(now: UInt64, idle: UInt64, due: UInt64) -> Bool {
        guard isLive else { return false }
        state = .measuring(since: now, idleAtStart: idle, due: due)
        return true
    }

    /// Records the interval that ends now (no lock held: metric handlers are called freely).
    func record(now: UInt64, idle: UInt64, queued: Int, handles: HandleCounts) {
        guard case .measuring(let since, let idleAtStart, let due) = state else { return }
        lag.recordNanoseconds(Int64(clamping: now > due ? now - due : 0))
        let wall = now > since ? now - since : 0
        let idleDelta = min(idle > idleAtStart ? idle - idleAtStart : 0, wall)
        if wall > 0 {
            idleTime.recordNanoseconds(Int64(clamping: idleDelta))
            busyRatio.record(1 - Double(idleDelta) / Double(wall))
        }
        queuedWork.record(queued)
        let present = Dictionary(handles.nonZero, uniquingKeysWith: +)
        for kind in present.keys where !handleGauges.contains(where: { $0.kind == kind }) {
            let gauge = Gauge(label: LoopMetrics.handlesLabel, dimensions: dimensions + [("type", kind)], factory: factory)
            handleGauges.append((kind, gauge))
        }
        for (kind, gauge) in handleGauges {
            gauge.record(present[kind] ?? 0)
        }
        state = .idle
    }

    /// Releases the metric objects in the factory (at shutdown); idempotent.
    func destroy() {
        guard isLive else { return }
        state = .destroyed
        lag.destroy()
        idleTime.destroy()
        busyRatio.destroy()
        queuedWork.destroy()
        for (_, gauge) in handleGauges { gauge.destroy() }
        handleGauges = []
    }
}

/// Open handles counted by libuv type name.
struct HandleCounts {
    /// Indexed by `uv_handle_type` raw value.
    fileprivate var byType = [Int](repeating: 0, count: Int(UV_HANDLE_TYPE_MAX.rawValue) + 1)
    /// Work scheduled on the loop's timer queue (not libuv handles), counted as "timer".
    var scheduledTimers = 0

    /// The types with at least one open handle, by libuv name.
    var nonZero: [(String, Int)] {
        var result: [(String, Int)] = []
        for (raw, count) in byType.enumerated() where count > 0 || (raw == Int(UV_TIMER.rawValue) && scheduledTimers > 0) {
            let kind = uv_handle_type_name(uv_handle_type(rawValue: UInt32(raw))).map { String(cString: $0) } ?? "unknown"
            result.append((kind, raw == Int(UV_TIMER.rawValue) ? count + scheduledTimers : count))
        }
        return result
    }
}

private struct HandleCountWalk {
    unowned(unsafe) let loop: EventLoop
    var counts = HandleCounts()
}

extension EventLoop {
    /// Whether this loop reports metrics.
    ///
    /// Thread rule: safe from any thread.
    public var reportsMetrics: Bool { metricsSampler != nil }

    /// Turns on libuv's idle-time accounting and makes the unreferenced probe timer; nil when metrics are off.
    static func makeMetricsProbe(
        for uvLoop: UnsafeMutablePointer<uv_loop_t>, configuration: LoopMetrics
    ) throws(UVError) -> UnsafeMutablePointer<uv_timer_t>? {
        guard configuration.isEnabled else { return nil }
        try uvCheck(ruv_loop_enable_idle_time_metric(uvLoop), "uv_loop_configure(UV_METRICS_IDLE_TIME)")
        let probe = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(UV_TIMER), alignment: 16)
            .bindMemory(to: uv_timer_t.self, capacity: 1)
        do {
            try uvCheck(uv_timer_init(uvLoop, probe), "uv_timer_init")
        } catch {
            probe.deallocate()
            throw error
        }
        // The probe never keeps the loop alive (an owner-thread run() still returns when idle).
        uv_unref(UnsafeMutableRawPointer(probe).assumingMemoryBound(to: uv_handle_t.self))
        return probe
    }

    /// Arms the probe and starts a sampling interval: when the loop starts, and on every `run()` of
    /// an owner-thread loop (time outside `run()` is neither lag nor busy time).
    func startMetricsProbe() {
        assertInEventLoop()
        guard metricsProbe != nil, !state.load(ordering: .relaxed).hasBegunClosing else { return }
        uv_update_time(uvLoop)
        armMetricsProbe(now: SchedulerInstant.now.nanoseconds, idle: uv_metrics_idle_time(uvLoop))
    }

    private func armMetricsProbe(now: UInt64, idle: UInt64) {
        guard let probe = metricsProbe, let sampler = metricsSampler else { return }
        // libuv fires the timer once its loop time (milliseconds, same clock) reaches this.
        let due = (uv_now(uvLoop) &+ sampler.intervalMilliseconds) &* 1_000_000
        guard sampler.begin(now: now, idle: idle, due: due) else { return }
        uvCheckReporting(uv_timer_start(probe, metricsProbeCallback, sampler.intervalMilliseconds, 0), "uv_timer_start")
    }

    /// The probe's callback: one sample, then the next interval.
    fileprivate func metricsProbeFired() {
        assertInEventLoop()
        guard let sampler = metricsSampler, !state.load(ordering: .relaxed).hasBegunClosing else { return }
        let now = SchedulerInstant.now.nanoseconds
        let idle = uv_metrics_idle_time(uvLoop)
        sampler.record(now: now, idle: idle, queued: queuedWorkCount, handles: countHandlesByType())
        armMetricsProbe(now: now, idle: idle)
    }

    /// Counts the open handles by type (the loop's own excluded) plus the pending scheduled timers.
    func countHandlesByType() -> HandleCounts {
        assertInEventLoop()
        var walk = HandleCountWalk(loop: self)
        withUnsafeMutablePointer(to: &walk) { pointer in
            uv_walk(uvLoop, { handle, argument in
                guard let handle, let argument else { return }
                let walk = argument.assumingMemoryBound(to: HandleCountWalk.self)
                if walk.pointee.loop.isInternal(handle) || uv_is_closing(handle) != 0 { return }
                let raw = Int(handle.pointee.type.rawValue)
                if raw < walk.pointee.counts.byType.count { walk.pointee.counts.byType[raw] += 1 }
            }, pointer)
        }
        walk.counts.scheduledTimers = timers.liveCount
        return walk.counts
    }

    /// At shutdown: closes the probe and destroys the metric objects.
    func closeMetricsProbeForShutdown() {
        guard let metricsProbe else { return }
        uv_close(UnsafeMutableRawPointer(metricsProbe).assumingMemoryBound(to: uv_handle_t.self), nil)
        metricsSampler?.destroy()
    }
}

private let metricsProbeCallback: uv_timer_cb = { handle in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().metricsProbeFired()
}

internal import CLibUV
import CoreMetrics

/// Whether, and how, an `EventLoop` reports metrics through swift-metrics.
///
/// Off by default. Turn it on for one loop when you make it:
///
/// ```swift
/// let loop = EventLoop(name: "io", metrics: .enabled(interval: .seconds(1)))
/// ```
///
/// or for every loop made afterwards (`EventLoop.shared` included, if it has
/// not started yet) with `LoopMetrics.default = .enabled()`.
///
/// An enabled loop configures libuv's idle-time metric before it first runs
/// (`UV_METRICS_IDLE_TIME`, which makes libuv poll once more per iteration)
/// and opens one unreferenced probe timer that fires every `interval` on the
/// loop thread. Each firing records, with the dimension `("loop", name)`:
///
/// - `reactiveuv_loop_lag` (Timer, nanoseconds): how late the probe fired
///   against its due time (a blocked or overloaded loop fires it late; libuv's
///   millisecond timers add up to a few milliseconds of noise);
/// - `reactiveuv_loop_idle_time` (Timer, nanoseconds): the time the loop spent
///   waiting for events since the previous firing;
/// - `reactiveuv_loop_busy_ratio` (Gauge, 0...1): the rest of that interval,
///   as a fraction: the time spent running callbacks;
/// - `reactiveuv_loop_queued_work` (Gauge): work items other threads queued
///   with `execute` that have not started (see `EventLoop.queuedWorkCount`);
/// - `reactiveuv_loop_handles` (Gauge, plus the dimension `("type", kind)`):
///   open handles by libuv type ("tcp", "fs_event", "timer", ...), the loop's
///   own internal handles excluded; work scheduled with `schedule(after:)`
///   counts as "timer". A type whose handles all closed reports 0.
///
/// A disabled loop adds no work to any path: no probe, no idle-time polling,
/// no metric objects. The metric objects are destroyed when the loop shuts down.
///
/// Thread rule: a value type; safe from any thread.
public struct LoopMetrics: Sendable {
    /// The time between samples; nil when metrics are off.
    public let interval: Duration?
    /// The factory the metrics are made with; nil means `MetricsSystem.factory` (bootstrapped by the program).
    public let factory: (any MetricsFactory)?

    /// The label of the event-loop lag Timer.
    public static let lagLabel = "reactiveuv_loop_lag"
    /// The label of the idle-time Timer (idle nanoseconds per interval).
    public static let idleTimeLabel = "reactiveuv_loop_idle_time"
    /// The label of the busy-ratio Gauge.
    public static let busyRatioLabel = "reactiveuv_loop_busy_ratio"
    /// The label of the queued cross-thread work Gauge.
    public static let queuedWorkLabel = "reactiveuv_loop_queued_work"
    /// The label of the open-handles Gauge (one per `("type", kind)`).
    public static let handlesLabel = "reactiveuv_loop_handles"

    /// No metrics: the default.
    ///
    /// Thread rule: safe from any thread.
    public static let disabled = LoopMetrics(interval: nil, factory: nil)

    /// Metrics sampled every `interval`.
    ///
    /// - Parameters:
    ///   - interval: The time between samples; raised to at least 1 ms
    ///     (libuv's timer resolution) and rounded up to whole milliseconds.
    ///   - factory: The swift-metrics factory to make the metrics with; nil
    ///     (the default) uses `MetricsSystem.factory` at the time the loop is made.
    /// - Returns: The configuration to pass to `EventLoop(name:metrics:)`.
    ///
    /// Thread rule: safe from any thread.
    public static func enabled(interval: Duration = .seconds(1), factory: (any MetricsFactory)? = nil) -> LoopMetrics {
        LoopMetrics(interval: max(interval, .milliseconds(1)), factory: factory)
    }

    /// Whether metrics are on.
    ///
    /// Thread rule: safe from any thread.
    public var isEnabled: Bool { interval != nil }

    /// What loops made without a `metrics:` argument use (initially `.disabled`).
    ///
    /// Set it early in `main`, before making loops: a loop reads it once, when
    /// it is made (`EventLoop.shared` when it is first used).
    ///
    /// Thread rule: safe from any thread.
    public static var `default`: LoopMetrics {
        get { defaultStorage.withLock { $0 } }
        set { defaultStorage.withLock { $0 = newValue } }
    }

    private static let defaultStorage = LockedValue(LoopMetrics.disabled)

    /// The interval in whole milliseconds, for libuv.
    var intervalMilliseconds: UInt64 {
        guard let interval else { return 0 }
        let (seconds, attoseconds) = interval.components
        let nanoseconds = UInt64(max(0, seconds)) &* 1_000_000_000 &+ UInt64(max(0, attoseconds) / 1_000_000_000)
        return max(1, (nanoseconds + 999_999) / 1_000_000)
    }
}

/// The metric objects of one loop and the previous sample, for the probe.
///
/// Made on the thread that makes the loop, before its thread starts (ordered by
/// `pthread_create`), then touched only on the loop thread.
final class LoopMetricsSampler {
    let intervalMilliseconds: UInt64
    let factory: any MetricsFactory
    let dimensions: [(String, String)]
    let lag: CoreMetrics.Timer
    let idleTime: CoreMetrics.Timer
    let busyRatio: Gauge
    let queuedWork: Gauge
    /// One gauge per handle type seen so far (loop thread only).
    private var handleGauges: [(kind: String, gauge: Gauge)] = []
    /// Monotonic nanoseconds of the previous sample (loop thread only).
    private var lastSampleAt: UInt64 = 0
    /// libuv's cumulative idle time at the previous sample (loop thread only).
    private var lastIdle: UInt64 = 0
    /// When the probe is due, in monotonic nanoseconds (loop thread only).
    var due: UInt64 = 0

    init(loopName: String, configuration: LoopMetrics) {
        intervalMilliseconds = configuration.intervalMilliseconds
        factory = configuration.factory ?? MetricsSystem.factory
        dimensions = [("loop", loopName)]
        lag = CoreMetrics.Timer(label: LoopMetrics.lagLabel, dimensions: dimensions, factory: factory)
        idleTime = CoreMetrics.Timer(label: LoopMetrics.idleTimeLabel, dimensions: dimensions, factory: factory)
        busyRatio = Gauge(label: LoopMetrics.busyRatioLabel, dimensions: dimensions, factory: factory)
        queuedWork = Gauge(label: LoopMetrics.queuedWorkLabel, dimensions: dimensions, factory: factory)
    }

    /// Starts a new interval now (the probe was just armed).
    func resetBaseline(now: UInt64, idle: UInt64) {
        lastSampleAt = now
        lastIdle = idle
    }

    /// Records one sample. No lock is held here: metric handlers are called freely.
    func record(now: UInt64, idle: UInt64, queued: Int, handles: HandleCounts) {
        lag.recordNanoseconds(Int64(clamping: now > due ? now - due : 0))
        let wall = now > lastSampleAt ? now - lastSampleAt : 0
        let idleDelta = idle > lastIdle ? idle - lastIdle : 0
        if wall > 0 {
            idleTime.recordNanoseconds(Int64(clamping: min(idleDelta, wall)))
            busyRatio.record(1 - Double(min(idleDelta, wall)) / Double(wall))
        }
        lastSampleAt = now
        lastIdle = idle
        queuedWork.record(queued)
        let present = Dictionary(handles.nonZero, uniquingKeysWith: +)
        for kind in present.keys where !handleGauges.contains(where: { $0.kind == kind }) {
            let gauge = Gauge(label: LoopMetrics.handlesLabel, dimensions: dimensions + [("type", kind)], factory: factory)
            handleGauges.append((kind, gauge))
        }
        for (kind, gauge) in handleGauges {
            gauge.record(present[kind] ?? 0)
        }
    }

    /// Releases the metric objects in the factory (at shutdown).
    func destroy() {
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

/// State for one `uv_walk` counting handles.
private struct HandleCountWalk {
    unowned(unsafe) let loop: EventLoop
    var counts = HandleCounts()
}

extension EventLoop {
    /// Whether this loop reports metrics (see `LoopMetrics`).
    ///
    /// Thread rule: safe from any thread.
    public var reportsMetrics: Bool { metricsSampler != nil }

    /// Makes the probe timer and the metric objects; called by `init` before the loop runs.
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

    /// Arms the probe for one interval from now and starts a new sampling interval.
    ///
    /// Loop thread only: when the loop starts running, and on every `run()` of an
    /// owner-thread loop (time spent outside `run()` is neither lag nor busy time).
    func startMetricsProbe() {
        guard let probe = metricsProbe, let sampler = metricsSampler, !closingStarted else { return }
        uv_update_time(uvLoop)
        sampler.resetBaseline(now: SchedulerInstant.now.nanoseconds, idle: uv_metrics_idle_time(uvLoop))
        armMetricsProbe(probe, sampler)
    }

    private func armMetricsProbe(_ probe: UnsafeMutablePointer<uv_timer_t>, _ sampler: LoopMetricsSampler) {
        // libuv fires the timer once its loop time reaches now + interval.
        sampler.due = (uv_now(uvLoop) &+ sampler.intervalMilliseconds) &* 1_000_000
        uvCheckReporting(uv_timer_start(probe, metricsProbeCallback, sampler.intervalMilliseconds, 0), "uv_timer_start")
    }

    /// The probe's callback: one sample, then the next interval.
    fileprivate func metricsProbeFired() {
        guard let probe = metricsProbe, let sampler = metricsSampler, !closingStarted else { return }
        let now = SchedulerInstant.now.nanoseconds
        let idle = uv_metrics_idle_time(uvLoop)
        let queued = queuedWorkCount
        let handles = countHandlesByType()
        sampler.record(now: now, idle: idle, queued: queued, handles: handles)
        armMetricsProbe(probe, sampler)
    }

    /// Counts the open handles by type (the loop's own excluded) plus the pending scheduled timers.
    func countHandlesByType() -> HandleCounts {
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

    /// Shutdown: destroys the metric objects (the probe handle is closed with the loop's own).
    func stopMetricsForShutdown() {
        metricsSampler?.destroy()
    }
}

private let metricsProbeCallback: uv_timer_cb = { handle in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().metricsProbeFired()
}

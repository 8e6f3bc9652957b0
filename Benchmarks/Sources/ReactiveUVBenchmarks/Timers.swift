import CBaselines
import Foundation
import NIOCore
import NIOPosix
import ReactiveUV

/// Counts fired timers on the loop thread.
final class FireCounter: @unchecked Sendable {
    // `remaining` and `lastFiredAt` are touched only on the loop thread; `done` hands the result over.
    var remaining: Int
    var lastFiredAt: UInt64 = 0
    let done = CondFlag()

    init(_ count: Int) { remaining = count }

    func fire() {
        remaining -= 1
        if remaining == 0 {
            lastFiredAt = nanoseconds()
            done.signal()
        }
    }
}

enum Timers {
    /// Scenario 2: libuv's million_timers shape, reported two ways.
    ///
    /// - "from the start": when the last timer fired, measured from the moment
    ///   scheduling began, minus the longest timeout (ANCHORS' definition).
    ///   libuv, Node and our `loopTimeScheduler` measure a timeout from the
    ///   loop's cached time, frozen while the start loop runs; the loop's own
    ///   scheduler and NIO measure it from each call (never early), so their
    ///   start phase adds to this figure. The target is judged on the row with
    ///   libuv's semantics.
    /// - "own due time": how late the last timer fired after the due time its
    ///   scheduler promised (the dispatch overhead).
    static func millionTimers(count: Int, cyclic: Bool, includeNIO: Bool) -> [ScenarioResult] {
        @Sendable func timeout(_ index: Int) -> Int { cyclic ? index % 1000 : 1 + index / 1000 }
        let longest = Double((0..<min(count, 1000 * 1001)).map(timeout).max() ?? 0) / 1000
        var fromStart: [Measurement] = [], ownDue: [Measurement] = []

        func record(_ name: String, begin: UInt64, started: UInt64, lastFired: UInt64, callRelative: Bool,
                    allocations: Double?, detail: String) {
            let start = Double(started - begin) / 1e9
            let total = Double(lastFired - begin) / 1e9
            let dueBase = callRelative ? started : begin
            let late = (Double(lastFired) - Double(dueBase)) / 1e9 - longest
            let rate = "start \(format(Double(count) / start / 1e6))M timers/s (\(format(start * 1000)) ms)"
            fromStart.append(Measurement(name, (total - longest) * 1000, detail: "\(rate); \(detail)",
                                         allocationsPerOperation: allocations))
            ownDue.append(Measurement(name, late * 1000, detail: callRelative ? "due = call + timeout" : "due = loop time at start + timeout"))
        }

        // Ours twice: the loop's scheduler (delays from each call: never early) and
        // its loop-time scheduler (delays from uv_now, as libuv and Node count them).
        for loopTime in [false, true] {
            let loop = ReactiveUV.EventLoop(name: "timers")
            let counter = FireCounter(count)
            let phases = CondFlag()
            let box = PhaseBox()
            let (_, allocations) = countingAllocations { () -> Void in
                loop.execute {
                    let scheduler: Scheduler = loopTime ? loop.loopTimeScheduler : loop
                    box.begin = nanoseconds()
                    for index in 0..<count {
                        scheduler.schedule(after: .milliseconds(timeout(index))) { counter.fire() }
                    }
                    box.started = nanoseconds()
                    phases.signal()
                }
                phases.wait()
                counter.done.wait()
            }
            loop.shutdown()
            if loopTime {
                // As for raw C (which updates the loop time just before `begin`), due = begin + timeout.
                record(Contender.oursLoopTime, begin: box.begin, started: box.started,
                       lastFired: counter.lastFiredAt, callRelative: false,
                       allocations: Double(allocations) / Double(count), detail: "loop.loopTimeScheduler.schedule(after:)")
            } else {
                record(Contender.ours, begin: box.begin, started: box.started, lastFired: counter.lastFiredAt, callRelative: true,
                       allocations: Double(allocations) / Double(count), detail: "Scheduler.schedule(after:)")
            }
        }
        do {
            var result = rawc_timers_result()
            rawc_million_timers(Int32(count), cyclic ? 1 : 0, &result)
            record(Contender.rawC, begin: 0, started: result.start_ns, lastFired: result.run_ns, callRelative: false,
                   allocations: 0, detail: "uv_timer_start; close \(format(Double(result.close_ns) / 1e6)) ms")
        }
        if includeNIO {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let nioLoop = group.next()
            let counter = FireCounter(count)
            let phases = CondFlag()
            let box = PhaseBox()
            nioLoop.execute {
                box.begin = nanoseconds()
                for index in 0..<count {
                    nioLoop.scheduleTask(in: .milliseconds(Int64(timeout(index)))) { counter.fire() }
                }
                box.started = nanoseconds()
                phases.signal()
            }
            phases.wait()
            counter.done.wait()
            try? group.syncShutdownGracefully()
            record(Contender.nio, begin: box.begin, started: box.started, lastFired: counter.lastFiredAt, callRelative: true,
                   allocations: nil, detail: "scheduleTask(in:)")
        }
        if let node = runNode("timers.js", [String(count), cyclic ? "cyclic" : "spread"]),
           let startNs = node["start_ns"], let runNs = node["run_ns"] {
            record(Contender.node, begin: 0, started: UInt64(startNs), lastFired: UInt64(runNs), callRelative: false,
                   allocations: nil, detail: "setTimeout")
        }
        let shape = cyclic ? "cyclic (timeout i % 1000 ms)" : "libuv shape (timeout 1 + i/1000 ms)"
        return [
            ScenarioResult(
                name: "1M timers, \(cyclic ? "cyclic" : "libuv shape"), from the start",
                workload: "\(count) one-shot timers, \(shape), scheduled on the loop thread; last fired minus the start of scheduling minus the longest timeout",
                unit: "ms past", higherIsBetter: false, target: (Contender.rawC, 1.5), measurements: fromStart,
                judged: Contender.oursLoopTime),
            ScenarioResult(
                name: "1M timers, \(cyclic ? "cyclic" : "libuv shape"), own due time",
                workload: "same run: how late the last timer fired after the due time its scheduler promised",
                unit: "ms late", higherIsBetter: false, target: (Contender.rawC, 1.5), measurements: ownDue),
        ]
    }
}

/// Phase timestamps written on the loop thread and read after `CondFlag` handed them over.
final class PhaseBox: @unchecked Sendable {
    // Written on the loop thread before the flag is signalled; read by the waiter afterwards.
    var begin: UInt64 = 0
    var started: UInt64 = 0
}

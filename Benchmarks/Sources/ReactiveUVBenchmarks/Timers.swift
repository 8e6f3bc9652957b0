import CBaselines
import Foundation
import NIOCore
import NIOPosix
import ReactiveUV

/// Counts fired timers on the loop thread, and when the last group began and ended.
final class FireCounter: @unchecked Sendable {
    // `remaining` and the instants are touched only on the loop thread; `done` hands the result over.
    var remaining: Int
    /// How many fires are left when the first timer of the last group fires.
    let groupStartsAt: Int
    var lastFiredAt: UInt64 = 0
    var groupFirstFiredAt: UInt64 = 0
    let done = CondFlag()

    init(_ count: Int, lastGroup: Int) {
        remaining = count
        groupStartsAt = lastGroup
    }

    func fire() {
        if remaining == groupStartsAt { groupFirstFiredAt = nanoseconds() }
        remaining -= 1
        if remaining == 0 {
            lastFiredAt = nanoseconds()
            done.signal()
        }
    }
}

/// One run of one contender, in nanoseconds from the start of scheduling.
struct TimerRun {
    var start: Double
    var lastFired: Double
    /// When the promised due time of the longest timeout falls (its scheduler's base + the timeout).
    var due: Double
    var groupFirstFired: Double
    var allocationsPerTimer: Double?
    var closeNanoseconds: Double?
}

enum Timers {
    /// Scenario 2: libuv's million_timers shape, reported two ways, median of `rounds` runs.
    ///
    /// - "from the start": when the last timer fired, measured from the moment
    ///   scheduling began, minus the longest timeout (ANCHORS' definition).
    ///   libuv, Node and our `loopTimeScheduler` measure a timeout from the
    ///   loop's cached time, frozen while the start loop runs; the loop's own
    ///   scheduler and NIO measure it from each call (never early), so their
    ///   start phase adds to this figure. The target is judged on the row with
    ///   libuv's semantics.
    /// - "own due time": how late the last timer fired after the due time its
    ///   scheduler promised (the dispatch overhead), split into how late the
    ///   last group of timers (those with the longest timeout) began to fire and
    ///   how long the group took. libuv's loop time is whole milliseconds read
    ///   before scheduling began, so "from the start" can be up to a millisecond
    ///   below "own due time" for the loop-time contenders.
    ///
    /// Ours and raw C run interleaved, `rounds` times; SwiftNIO and Node once.
    static func millionTimers(count: Int, cyclic: Bool, includeNIO: Bool, rounds: Int) -> [ScenarioResult] {
        @Sendable func timeout(_ index: Int) -> Int { cyclic ? index % 1000 : 1 + index / 1000 }
        let timeouts = (0..<count).map(timeout)
        let longestMs = timeouts.max() ?? 0
        let lastGroup = timeouts.lazy.filter { $0 == longestMs }.count
        let longest = Double(longestMs) * 1e6

        func ours(loopTime: Bool) -> TimerRun {
            let loop = ReactiveUV.EventLoop(name: "timers")
            let counter = FireCounter(count, lastGroup: lastGroup)
            let phases = CondFlag()
            let box = PhaseBox()
            let (_, allocations) = countingAllocations { () -> Void in
                loop.execute {
                    let scheduler: Scheduler = loopTime ? loop.loopTimeScheduler : loop
                    box.begin = nanoseconds()
                    box.base = loopTime ? loop.loopTimeScheduler.loopTime.nanoseconds : box.begin
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
            // The loop's own scheduler promises each timer its delay from its own call; the
            // last group was scheduled last, so its due time is at most `started + longest`.
            let dueBase = loopTime ? Double(box.base) : Double(box.started)
            return TimerRun(start: Double(box.started - box.begin), lastFired: Double(counter.lastFiredAt - box.begin),
                            due: dueBase - Double(box.begin) + longest,
                            groupFirstFired: Double(counter.groupFirstFiredAt - box.begin),
                            allocationsPerTimer: Double(allocations) / Double(count))
        }

        func rawC() -> TimerRun {
            var result = rawc_timers_result()
            rawc_million_timers(Int32(count), cyclic ? 1 : 0, &result)
            return TimerRun(start: Double(result.start_ns), lastFired: Double(result.run_ns),
                            due: longest - Double(result.due_base_ns), groupFirstFired: Double(result.group_first_ns),
                            allocationsPerTimer: 0, closeNanoseconds: Double(result.close_ns))
        }

        var runs: [String: [TimerRun]] = [:]
        for _ in 0..<rounds {
            runs[Contender.ours, default: []].append(ours(loopTime: false))
            runs[Contender.oursLoopTime, default: []].append(ours(loopTime: true))
            runs[Contender.rawC, default: []].append(rawC())
        }
        if includeNIO {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let nioLoop = group.next()
            let counter = FireCounter(count, lastGroup: lastGroup)
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
            runs[Contender.nio] = [TimerRun(start: Double(box.started - box.begin), lastFired: Double(counter.lastFiredAt - box.begin),
                                            due: Double(box.started - box.begin) + longest,
                                            groupFirstFired: Double(counter.groupFirstFiredAt - box.begin))]
        }
        if let node = runNode("timers.js", [String(count), cyclic ? "cyclic" : "spread"]),
           let startNs = node["start_ns"], let runNs = node["run_ns"] {
            // Node's loop time is libuv's, read just before scheduling began: due ≈ the timeout.
            runs[Contender.node] = [TimerRun(start: startNs, lastFired: runNs, due: longest, groupFirstFired: node["group_first_ns"] ?? .nan)]
        }

        let details: [String: String] = [
            Contender.ours: "Scheduler.schedule(after:)",
            Contender.oursLoopTime: "loop.loopTimeScheduler.schedule(after:)",
            Contender.rawC: "uv_timer_start",
            Contender.nio: "scheduleTask(in:)",
            Contender.node: "setTimeout",
        ]
        var fromStart: [Measurement] = [], ownDue: [Measurement] = []
        for name in [Contender.ours, Contender.oursLoopTime, Contender.rawC, Contender.nio, Contender.node] {
            guard let list = runs[name], !list.isEmpty else { continue }
            func ms(_ value: Double) -> String { format(value / 1e6) }
            let past = list.map { ($0.lastFired - longest) / 1e6 }
            let late = list.map { ($0.lastFired - $0.due) / 1e6 }
            let start = median(list.map(\.start))
            let rounds = list.count > 1 ? "median of \(list.count): " : ""
            let spread = list.count > 1 ? " (runs \(format(past.min()!))–\(format(past.max()!)))" : ""
            var detail = "\(rounds)start \(format(Double(count) / start * 1e3))M timers/s (\(ms(start)) ms)\(spread); \(details[name]!)"
            if let close = list.compactMap(\.closeNanoseconds).first {
                detail += "; close \(ms(close)) ms"
            } else if name == Contender.ours || name == Contender.oursLoopTime {
                detail += "; close: none (no handle per timer)"
            }
            fromStart.append(Measurement(name, median(past), detail: detail,
                                         allocationsPerOperation: list.first?.allocationsPerTimer))
            let groupLate = median(list.map { ($0.groupFirstFired - $0.due) / 1e6 })
            let groupSpan = median(list.map { ($0.lastFired - $0.groupFirstFired) / 1e6 })
            let base = name == Contender.ours || name == Contender.nio ? "due = call + timeout" : "due = loop time at start + timeout"
            let lateSpread = list.count > 1 ? " (runs \(format(late.min()!))–\(format(late.max()!)))" : ""
            let split = groupLate.isNaN ? "" : "; last \(lastGroup) began \(format(groupLate)) ms late, took \(format(groupSpan)) ms"
            ownDue.append(Measurement(name, median(late), detail: "\(rounds)\(base)\(lateSpread)\(split)"))
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
                workload: "same runs: how late the last timer fired after the due time its scheduler promised",
                unit: "ms late", higherIsBetter: false, target: (Contender.rawC, 1.5), measurements: ownDue,
                judged: Contender.oursLoopTime),
        ]
    }
}

/// Phase timestamps written on the loop thread and read after `CondFlag` handed them over.
final class PhaseBox: @unchecked Sendable {
    // Written on the loop thread before the flag is signalled; read by the waiter afterwards.
    var begin: UInt64 = 0
    var base: UInt64 = 0
    var started: UInt64 = 0
}

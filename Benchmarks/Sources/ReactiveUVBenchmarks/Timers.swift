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
    /// Scenario 2: libuv's million_timers shape.
    ///
    /// "past" is how late the last timer fired after its due time. libuv and Node
    /// measure a timeout from the loop's cached time when scheduling began;
    /// ReactiveUV and NIO from the moment of each call, so their last due time is
    /// the end of the start phase plus the longest timeout.
    static func millionTimers(count: Int, cyclic: Bool, includeNIO: Bool) -> ScenarioResult {
        @Sendable func timeout(_ index: Int) -> Int { cyclic ? index % 1000 : 1 + index / 1000 }
        let longest = (0..<min(count, 1000 * 1001)).map(timeout).max() ?? 0
        var measurements: [Measurement] = []

        do {
            let loop = ReactiveUV.EventLoop(name: "timers")
            let counter = FireCounter(count)
            let phases = CondFlag()
            let box = PhaseBox()
            let (_, allocations) = countingAllocations { () -> Void in
                loop.execute {
                    box.begin = nanoseconds()
                    for index in 0..<count {
                        loop.schedule(after: .milliseconds(timeout(index))) { counter.fire() }
                    }
                    box.started = nanoseconds()
                    phases.signal()
                }
                phases.wait()
                counter.done.wait()
            }
            loop.shutdown()
            let start = Double(box.started - box.begin) / 1e9
            let past = ((Double(counter.lastFiredAt) - Double(box.started)) / 1e9 - Double(longest) / 1000) * 1000
            measurements.append(Measurement(Contender.ours, past,
                                            detail: "start \(format(Double(count) / start / 1e6))M timers/s (\(format(start)) s); closes as each fires",
                                            allocationsPerOperation: Double(allocations) / Double(count)))
        }
        do {
            var result = rawc_timers_result()
            rawc_million_timers(Int32(count), cyclic ? 1 : 0, &result)
            let start = Double(result.start_ns) / 1e9
            let past = (Double(result.run_ns) / 1e9 - Double(result.longest_ms) / 1000) * 1000
            measurements.append(Measurement(Contender.rawC, past,
                                            detail: "start \(format(Double(count) / start / 1e6))M timers/s (\(format(start)) s); close \(format(Double(result.close_ns) / 1e9)) s"))
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
            let start = Double(box.started - box.begin) / 1e9
            let past = ((Double(counter.lastFiredAt) - Double(box.started)) / 1e9 - Double(longest) / 1000) * 1000
            measurements.append(Measurement(Contender.nio, past, detail: "start \(format(Double(count) / start / 1e6))M timers/s; scheduleTask"))
        }
        if let node = runNode("timers.js", [String(count), cyclic ? "cyclic" : "spread"]),
           let startNs = node["start_ns"], let runNs = node["run_ns"], let nodeLongest = node["longest_ms"] {
            let past = (runNs / 1e9 - nodeLongest / 1000) * 1000
            measurements.append(Measurement(Contender.node, past, detail: "start \(format(Double(count) / (startNs / 1e9) / 1e6))M timers/s; setTimeout"))
        }
        return ScenarioResult(
            name: cyclic ? "1M timers, cyclic" : "1M timers, libuv shape",
            workload: "\(count) one-shot timers, timeout \(cyclic ? "i % 1000" : "1 + i/1000") ms, scheduled on the loop thread; seconds the last one fired after it was due",
            unit: "ms past due", higherIsBetter: false, target: (Contender.rawC, 1.5),
            measurements: measurements)
    }
}

/// Phase timestamps written on the loop thread and read after `CondFlag` handed them over.
final class PhaseBox: @unchecked Sendable {
    // Written on the loop thread before the flag is signalled; read by the waiter afterwards.
    var begin: UInt64 = 0
    var started: UInt64 = 0
}

import CBaselines
import Dispatch
import Foundation
import NIOCore
import NIOPosix
import ReactiveUV

/// Counts items on the consumer's thread and signals when the last one ran.
final class ItemCounter: @unchecked Sendable {
    // `remaining` and `finishedAt` are touched only on the consumer's (loop or queue) thread;
    // `done` hands the result to the producer.
    var remaining: Int
    var finishedAt: UInt64 = 0
    let done = CondFlag()

    init(_ count: Int) { remaining = count }

    func tick() {
        remaining -= 1
        if remaining == 0 {
            finishedAt = nanoseconds()
            done.signal()
        }
    }
}

enum CrossThread {
    /// Scenario 1a: a foreign thread posts `count` closures; time until the last ran.
    static func throughput(count: Int, rounds: Int) -> ScenarioResult {
        var ours: [Double] = [], oursBare: [Double] = [], raw: [Double] = [], rawRefcounted: [Double] = [], nio: [Double] = [], dispatch: [Double] = []
        var oursWithMetrics: [Double] = []
        var oursAllocations = 0.0, nioAllocations = 0.0, dispatchAllocations = 0.0
        var rawWakeups: UInt64 = 0, oursWakeups = 0
        let loop = ReactiveUV.EventLoop(name: "bench")
        // The same runtime with loop metrics on (no backend bootstrapped: swift-metrics' no-op
        // handlers), to show what turning them on costs: libuv's idle-time accounting and the probe.
        let metricsLoop = ReactiveUV.EventLoop(name: "bench-metrics", metrics: .enabled(interval: .seconds(1)))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let nioLoop = group.next()
        let queue = DispatchQueue(label: "bench")
        for _ in 0..<rounds {
            do {
                let counter = ItemCounter(count)
                let wakeupsBefore = loop.crossThreadWakeupCount
                let (begin, allocations) = countingAllocations { () -> UInt64 in
                    let begin = nanoseconds()
                    for _ in 0..<count { loop.execute { counter.tick() } }
                    counter.done.wait()
                    return begin
                }
                ours.append(Double(count) / (Double(counter.finishedAt - begin) / 1e9) / 1e6)
                oursAllocations = Double(allocations) / Double(count)
                oursWakeups = loop.crossThreadWakeupCount - wakeupsBefore
            }
            do {
                let counter = ItemCounter(count)
                let begin = nanoseconds()
                for _ in 0..<count { metricsLoop.execute { counter.tick() } }
                counter.done.wait()
                oursWithMetrics.append(Double(count) / (Double(counter.finishedAt - begin) / 1e9) / 1e6)
            }
            do {
                // The same with a closure that captures nothing (like the C baseline's function
                // pointer + raw argument): the runtime's own cost, without reference counting
                // on an object shared by both threads.
                let counter = ItemCounter(count)
                SharedCounter.current = counter
                let begin = nanoseconds()
                for _ in 0..<count { loop.execute { SharedCounter.current.unsafelyUnwrapped.tick() } }
                counter.done.wait()
                oursBare.append(Double(count) / (Double(counter.finishedAt - begin) / 1e9) / 1e6)
            }
            do {
                var wakeups: UInt64 = 0
                let elapsed = rawc_execute_throughput(Int32(count), &wakeups)
                raw.append(Double(count) / (Double(elapsed) / 1e9) / 1e6)
                rawWakeups = wakeups
            }
            do {
                var wakeups: UInt64 = 0
                let elapsed = rawc_execute_throughput_refcounted(Int32(count), &wakeups, 1)
                rawRefcounted.append(Double(count) / (Double(elapsed) / 1e9) / 1e6)
            }
            do {
                let counter = ItemCounter(count)
                let (begin, allocations) = countingAllocations { () -> UInt64 in
                    let begin = nanoseconds()
                    for _ in 0..<count { nioLoop.execute { counter.tick() } }
                    counter.done.wait()
                    return begin
                }
                nio.append(Double(count) / (Double(counter.finishedAt - begin) / 1e9) / 1e6)
                nioAllocations = Double(allocations) / Double(count)
            }
            do {
                let counter = ItemCounter(count)
                let (begin, allocations) = countingAllocations { () -> UInt64 in
                    let begin = nanoseconds()
                    for _ in 0..<count { queue.async { counter.tick() } }
                    counter.done.wait()
                    return begin
                }
                dispatch.append(Double(count) / (Double(counter.finishedAt - begin) / 1e9) / 1e6)
                dispatchAllocations = Double(allocations) / Double(count)
            }
        }
        loop.shutdown()
        metricsLoop.shutdown()
        try? group.syncShutdownGracefully()
        return ScenarioResult(
            name: "cross-thread execute throughput",
            workload: "a foreign thread posts \(count) closures to one loop; time from the first post until the last ran (median of \(rounds))",
            unit: "M items/s", higherIsBetter: true, target: (Contender.rawC, 0.8),
            measurements: [
                Measurement(Contender.ours, median(ours), detail: "closure capturing an object; \(count / max(oursWakeups, 1)) items/wake-up", allocationsPerOperation: oursAllocations),
                Measurement(Contender.oursBare, median(oursBare), detail: "closure without captures"),
                Measurement(Contender.oursWithMetrics, median(oursWithMetrics), detail: "the first row on a loop with LoopMetrics.enabled(interval: 1 s), no metrics backend"),
                Measurement(Contender.rawC, median(raw), detail: "\(UInt64(count) / max(rawWakeups, 1)) items/wake-up", allocationsPerOperation: 0),
                Measurement(Contender.rawCRefcounted, median(rawRefcounted), detail: "the same, plus a shared atomic reference count per item"),
                Measurement(Contender.nio, median(nio), detail: "EventLoop.execute", allocationsPerOperation: nioAllocations),
                Measurement(Contender.dispatch, median(dispatch), detail: "serial queue async", allocationsPerOperation: dispatchAllocations),
            ],
            // Judged like for like: the C item is a function pointer and a raw argument,
            // which is what a closure without reference-counted captures is. The first
            // row's ratio to "raw C, refcounted" compares the capturing shapes.
            judged: Contender.oursBare)
    }

    /// Scenario 1b: post one item, wait on a condition variable the loop signals; `count` round trips.
    static func pingPong(count: Int) -> ScenarioResult {
        func summary(_ latencies: [UInt64]) -> (median: Double, p99: Double) {
            let sorted = latencies.sorted()
            return (percentile(sorted, 0.5) / 1000, percentile(sorted, 0.99) / 1000)
        }
        let loop = ReactiveUV.EventLoop(name: "bench")
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let nioLoop = group.next()
        let queue = DispatchQueue(label: "bench")
        let flag = CondFlag()
        func roundTrips(_ post: (@escaping @Sendable () -> Void) -> Void) -> [UInt64] {
            var latencies = [UInt64](repeating: 0, count: count)
            for index in 0..<count {
                let begin = nanoseconds()
                post { flag.signal() }
                flag.wait()
                latencies[index] = nanoseconds() - begin
            }
            return latencies
        }
        let ours = summary(roundTrips { loop.execute($0) })
        var rawLatencies = [UInt64](repeating: 0, count: count)
        rawc_execute_pingpong(Int32(count), &rawLatencies)
        let raw = summary(rawLatencies)
        let nio = summary(roundTrips { nioLoop.execute($0) })
        let dispatch = summary(roundTrips { queue.async(execute: $0) })
        var floorLatencies = [UInt64](repeating: 0, count: count)
        rawc_condvar_pingpong(Int32(count), &floorLatencies)
        let floor = summary(floorLatencies)
        loop.shutdown()
        try? group.syncShutdownGracefully()
        func measurement(_ name: String, _ figures: (median: Double, p99: Double)) -> Measurement {
            Measurement(name, figures.median, detail: "p99 \(format(figures.p99)) µs")
        }
        return ScenarioResult(
            name: "cross-thread ping-pong latency",
            workload: "\(count) round trips: a foreign thread posts one item, waits on a condvar the loop signals (median)",
            unit: "µs", higherIsBetter: false, target: (Contender.rawC, 1.2),
            measurements: [measurement(Contender.ours, ours), measurement(Contender.rawC, raw),
                           measurement(Contender.nio, nio), measurement(Contender.dispatch, dispatch),
                           measurement(Contender.condvar, floor)])
    }
}

enum SharedCounter {
    nonisolated(unsafe) static var current: ItemCounter?  // set before posting; read on the loop thread after the post that publishes it
}

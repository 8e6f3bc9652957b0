import CBaselines
import Foundation
import NIOCore
import NIOPosix
import ReactiveUV

/// A chain of loop-thread work, each item queueing the next.
final class Chain: @unchecked Sendable {
    // Touched only on the loop thread.
    var remaining: Int
    let done = CondFlag()
    init(_ count: Int) { remaining = count }
}

/// Ours with one capture: the closure's context is this object, so queueing an item allocates
/// nothing, as the C side posts a function and one argument.
final class LoopChain: @unchecked Sendable {
    // Touched only on the loop thread, except `done`.
    let loop: ReactiveUV.EventLoop
    var remaining: Int
    let done = CondFlag()
    init(loop: ReactiveUV.EventLoop, count: Int) {
        self.loop = loop
        remaining = count
    }
    func step() {
        remaining -= 1
        if remaining == 0 { done.signal() } else { loop.execute { self.step() } }
    }
}

enum LoopTick {
    /// Scenario 3: the run queue's per-item cost on the loop thread, and libuv's empty tick.
    static func runQueue(count: Int) -> ScenarioResult {
        @Sendable func step(_ loop: ReactiveUV.EventLoop, _ chain: Chain) {
            chain.remaining -= 1
            if chain.remaining == 0 { chain.done.signal() } else { loop.execute { step(loop, chain) } }
        }
        @Sendable func nioStep(_ loop: any NIOCore.EventLoop, _ chain: Chain) {
            chain.remaining -= 1
            if chain.remaining == 0 { chain.done.signal() } else { loop.execute { nioStep(loop, chain) } }
        }
        // Ours and C alternate over five rounds (each run is short: one tens of milliseconds); the median of each.
        let loop = ReactiveUV.EventLoop(name: "chain")
        var ours: [Double] = [], twoCaptures: [Double] = [], rawC: [Double] = []
        var allocations: UInt = 0, twoCapturesAllocations: UInt = 0
        for _ in 0..<5 {
            let oneCapture = LoopChain(loop: loop, count: count)
            let (elapsed, made) = countingAllocations { () -> UInt64 in
                let begin = nanoseconds()
                loop.execute { oneCapture.step() }
                oneCapture.done.wait()
                return nanoseconds() - begin
            }
            ours.append(Double(elapsed))
            allocations = made
            rawC.append(Double(rawc_local_chain(Int32(count))))
            let chain = Chain(count)
            let (twoElapsed, twoMade) = countingAllocations { () -> UInt64 in
                let begin = nanoseconds()
                loop.execute { step(loop, chain) }
                chain.done.wait()
                return nanoseconds() - begin
            }
            twoCaptures.append(Double(twoElapsed))
            twoCapturesAllocations = twoMade
        }
        loop.shutdown()
        let elapsed = median(ours), twoCapturesElapsed = median(twoCaptures), raw = median(rawC)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let nioLoop = group.next()
        let nioChain = Chain(count)
        let (nioElapsed, nioAllocations) = countingAllocations { () -> UInt64 in
            let begin = nanoseconds()
            nioLoop.execute { nioStep(nioLoop, nioChain) }
            nioChain.done.wait()
            return nanoseconds() - begin
        }
        try? group.syncShutdownGracefully()
        let ticks = rawc_loop_count(Int32(count))
        return ScenarioResult(
            name: "loop-thread run queue",
            workload: "a chain of \(count) items on the loop thread, each queueing the next (ns per item, median of five alternating rounds for ours and C); libuv loop_count for the empty tick",
            unit: "ns/item", higherIsBetter: false, target: (Contender.rawC, 3),
            measurements: [
                Measurement(Contender.ours, Double(elapsed) / Double(count),
                            detail: "EventLoop.execute on the loop, a closure capturing the chain (C posts a function and its argument)",
                            allocationsPerOperation: Double(allocations) / Double(count)),
                Measurement("ours, two captures", Double(twoCapturesElapsed) / Double(count),
                            detail: "a closure capturing the loop and the chain: its context is allocated per item (not a contender)",
                            allocationsPerOperation: Double(twoCapturesAllocations) / Double(count)),
                Measurement(Contender.rawC, Double(raw) / Double(count), detail: "same queue in C, drained from an idle handle"),
                Measurement(Contender.nio, Double(nioElapsed) / Double(count), detail: "EventLoop.execute on the loop",
                            allocationsPerOperation: Double(nioAllocations) / Double(count)),
                Measurement("libuv empty tick", Double(ticks) / Double(count), detail: "loop_count: one idle callback per iteration"),
            ])
    }
}

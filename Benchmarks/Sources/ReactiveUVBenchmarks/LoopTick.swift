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
        let loop = ReactiveUV.EventLoop(name: "chain")
        let chain = Chain(count)
        let (elapsed, allocations) = countingAllocations { () -> UInt64 in
            let begin = nanoseconds()
            loop.execute { step(loop, chain) }
            chain.done.wait()
            return nanoseconds() - begin
        }
        loop.shutdown()
        let raw = rawc_local_chain(Int32(count))
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
            workload: "a chain of \(count) items on the loop thread, each queueing the next (ns per item); libuv loop_count for the empty tick",
            unit: "ns/item", higherIsBetter: false, target: nil,
            measurements: [
                Measurement(Contender.ours, Double(elapsed) / Double(count), detail: "EventLoop.execute on the loop",
                            allocationsPerOperation: Double(allocations) / Double(count)),
                Measurement(Contender.rawC, Double(raw) / Double(count), detail: "same queue in C, drained from an idle handle"),
                Measurement(Contender.nio, Double(nioElapsed) / Double(count), detail: "EventLoop.execute on the loop",
                            allocationsPerOperation: Double(nioAllocations) / Double(count)),
                Measurement("libuv empty tick", Double(ticks) / Double(count), detail: "loop_count: one idle callback per iteration"),
            ])
    }
}

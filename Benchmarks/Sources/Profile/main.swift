// Single workloads for instruction counting with callgrind:
//   valgrind --tool=callgrind Profile chain 100000
// Per-item cost = (Ir(N2) − Ir(N1)) / (N2 − N1). Valgrind 3.19 cannot read the
// DWARF 5 Swift emits: run it on a copy made with `strip -g`.
import Foundation
import CBaselines
import ReactiveUV

enum Shared {
    nonisolated(unsafe) static var countdown: Countdown?  // set before posting; read only on the loop thread
}

final class Flag: @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var raised = false
    func raise() { condition.lock(); raised = true; condition.signal(); condition.unlock() }
    func wait() { condition.lock(); while !raised { condition.wait() }; condition.unlock() }
}

final class Countdown: @unchecked Sendable {
    // Touched only on the loop thread.
    var remaining: Int
    let done = Flag()
    init(_ count: Int) { remaining = count }
    func tick() {
        remaining -= 1
        if remaining == 0 { done.raise() }
    }
}

let mode = CommandLine.arguments.dropFirst().first ?? "chain"
let count = CommandLine.arguments.dropFirst(2).first.flatMap(Int.init) ?? 100_000
let loop = ReactiveUV.EventLoop(name: "profile")

switch mode {
case "chain":
    let countdown = Countdown(count)
    @Sendable func step() {
        countdown.tick()
        if countdown.remaining > 0 { loop.execute(step) }
    }
    loop.execute(step)
    countdown.done.wait()
case "execute":
    let countdown = Countdown(count)
    for _ in 0..<count { loop.execute { countdown.tick() } }
    countdown.done.wait()
case "execute-nocapture":
    let countdown = Countdown(count)
    Shared.countdown = countdown
    for _ in 0..<count { loop.execute { Shared.countdown!.tick() } }
    countdown.done.wait()
case "rawc-execute":
    var wakeups: UInt64 = 0
    _ = rawc_execute_throughput(Int32(count), &wakeups)
case "rawc-chain":
    _ = rawc_local_chain(Int32(count))
case "timers":
    let countdown = Countdown(count)
    loop.execute {
        for index in 0..<count {
            loop.schedule(after: .milliseconds(1 + index / 1000)) { countdown.tick() }
        }
    }
    countdown.done.wait()
default:
    print("modes: chain, execute, timers")
}
loop.shutdown()

import ReactiveUV

/// The driver's look at its loops before each callback: what is ready, in the order the seeded
/// draw indexes it (loop by loop; shutdown, queued, inbox, timer, pool within a loop), and the earliest
/// live timer of any loop. It runs before every callback, so it retains no loop, keeps its storage
/// from one look to the next, and looks again only at the loop that ran and the loops marked stale
/// (work from outside, a state change, a pool job); the others keep their last look, their timer
/// readiness taken against the clock now. Debug builds check every kept look against a fresh one.
///
/// Thread rule: the simulation's driving thread, between callbacks.
final class SimulationLook {
    /// A loop's last look: its readiness bits and its earliest deadline (`.max` when none).
    private struct Kept {
        var ready: UInt8
        var deadline: UInt64
    }

    // Exclusivity unchecked: the driving thread only, and no access spans a call back into the look.
    /// The simulation's loops, unretained: its `loops` array keeps them and only ever grows.
    @exclusivity(unchecked) private var loops: [Unmanaged<EventLoop>] = []
    @exclusivity(unchecked) private var kept: UnsafeMutablePointer<Kept>
    @exclusivity(unchecked) private var candidates: UnsafeMutablePointer<(loop: Int, ready: SimulatedReadiness)>
    /// How many callbacks are ready.
    @exclusivity(unchecked) private(set) var count = 0
    /// The earliest deadline (virtual nanoseconds) of a live timer on any loop; nil when none.
    @exclusivity(unchecked) private(set) var earliestDeadline: UInt64?
    /// The loop whose callback ran since the last look; -1 when none did.
    @exclusivity(unchecked) private var ran = -1

    init() {
        kept = .allocate(capacity: 1)
        candidates = .allocate(capacity: 1)
    }

    deinit {
        kept.deallocate()
        candidates.deallocate()
    }

    /// The `index`th ready callback: which loop, what kind.
    subscript(index: Int) -> (loop: Int, ready: SimulatedReadiness) {
        precondition(index >= 0 && index < count, "no such ready callback")
        return candidates[index]
    }

    /// Loop `index`, unretained (the simulation's `loops` keeps it).
    func loop(at index: Int) -> Unmanaged<EventLoop> {
        loops[index]
    }

    /// Notes that a callback of loop `index` ran: the next look looks at it again.
    func noteRan(_ index: Int) {
        ran = index
    }

    /// Looks at every loop of `simulationLoops` at virtual time `now`.
    func take(_ simulationLoops: [EventLoop], now: UInt64) {
        if loops.count != simulationLoops.count { resize(simulationLoops) }
        var found = 0
        var earliest = UInt64.max
        let kept = kept, candidates = candidates
        for index in loops.indices {
            let loop = loops[index]
            if index == ran || loop._withUnsafeGuaranteedRef({ $0.takeSimulationStale() }) {
                let (ready, deadline) = loop._withUnsafeGuaranteedRef { $0.simulatedLook() }
                kept[index] = Kept(ready: ready.rawValue, deadline: deadline ?? .max)
            } else {
                let timer = SimulatedReadiness.timer.rawValue
                kept[index].ready = kept[index].deadline <= now ? kept[index].ready | timer : kept[index].ready & ~timer
                assert(loop._withUnsafeGuaranteedRef { $0.simulatedLook() }
                        == (SimulatedReadiness(rawValue: kept[index].ready), kept[index].deadline == .max ? nil : kept[index].deadline),
                       "the simulation kept a stale look at loop \(index)")
            }
            let entry = kept[index]
            if entry.deadline < earliest { earliest = entry.deadline }
            let bits = entry.ready
            if bits == 0 { continue }
            if bits & SimulatedReadiness.shutdown.rawValue != 0 { candidates[found] = (index, .shutdown); found += 1 }
            if bits & SimulatedReadiness.queued.rawValue != 0 { candidates[found] = (index, .queued); found += 1 }
            if bits & SimulatedReadiness.inbox.rawValue != 0 { candidates[found] = (index, .inbox); found += 1 }
            if bits & SimulatedReadiness.timer.rawValue != 0 { candidates[found] = (index, .timer); found += 1 }
            if bits & SimulatedReadiness.pool.rawValue != 0 { candidates[found] = (index, .pool); found += 1 }
        }
        count = found
        earliestDeadline = earliest == .max ? nil : earliest
        ran = -1
    }

    /// The look `take` would give after a look that found nothing ready and only the clock
    /// moved since, to `now`: the timers due then, loop by loop (nothing else can have changed).
    func takeAfterClockMoved(to now: UInt64) {
        var found = 0
        for index in loops.indices where kept[index].deadline <= now {
            kept[index].ready |= SimulatedReadiness.timer.rawValue
            candidates[found] = (index, .timer)
            found += 1
        }
        count = found
    }

    /// The kinds of callback a loop can have ready at once.
    private static let kindCount = 5

    private func resize(_ simulationLoops: [EventLoop]) {
        loops = simulationLoops.map { Unmanaged.passUnretained($0) }
        kept.deallocate()
        candidates.deallocate()
        kept = .allocate(capacity: max(1, loops.count))
        kept.initialize(repeating: Kept(ready: 0, deadline: .max), count: loops.count)
        candidates = .allocate(capacity: max(1, loops.count * Self.kindCount))
        for loop in simulationLoops { loop.markSimulationStale() }
    }
}

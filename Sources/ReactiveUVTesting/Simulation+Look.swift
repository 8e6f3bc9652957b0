import ReactiveUV

/// The driver's look at its loops before each callback: what is ready, in the order the seeded
/// draw indexes it (loop by loop; shutdown, queued, inbox, timer, pool within a loop), and the earliest
/// live timer of any loop. It runs before every callback, so it retains no loop and keeps its
/// storage from one look to the next.
///
/// Thread rule: the simulation's driving thread, between callbacks.
struct SimulationLook {
    private var candidates: [(loop: Int, ready: SimulatedReadiness)] = []
    /// The simulation's loops, unretained: its `loops` array keeps them and only ever grows.
    private var loops: [Unmanaged<EventLoop>] = []
    /// How many callbacks are ready.
    private(set) var count = 0
    /// The earliest deadline (virtual nanoseconds) of a live timer on any loop; nil when none.
    private(set) var earliestDeadline: UInt64?
    /// Each loop's earliest deadline at the last look.
    private var deadlines: [UInt64?] = []

    /// The `index`th ready callback: which loop, what kind.
    subscript(index: Int) -> (loop: Int, ready: SimulatedReadiness) { candidates[index] }

    /// Looks at every loop of `simulationLoops` now.
    mutating func take(_ simulationLoops: [EventLoop]) {
        if loops.count != simulationLoops.count {
            loops = simulationLoops.map { Unmanaged.passUnretained($0) }
            deadlines = Array(repeating: nil, count: loops.count)
        }
        count = 0
        earliestDeadline = nil
        for index in loops.indices {
            let (ready, deadline) = loops[index]._withUnsafeGuaranteedRef { $0.simulatedLook() }
            deadlines[index] = deadline
            if let deadline, earliestDeadline.map({ deadline < $0 }) ?? true { earliestDeadline = deadline }
            let bits = ready.rawValue
            if bits == 0 { continue }
            if bits & SimulatedReadiness.shutdown.rawValue != 0 { add(index, .shutdown) }
            if bits & SimulatedReadiness.queued.rawValue != 0 { add(index, .queued) }
            if bits & SimulatedReadiness.inbox.rawValue != 0 { add(index, .inbox) }
            if bits & SimulatedReadiness.timer.rawValue != 0 { add(index, .timer) }
            if bits & SimulatedReadiness.pool.rawValue != 0 { add(index, .pool) }
        }
    }

    /// The look `take` would give after a look that found nothing ready and only the clock
    /// moved since, to `now`: the timers due then, loop by loop (nothing else can have changed).
    mutating func takeAfterClockMoved(to now: UInt64) {
        count = 0
        for index in deadlines.indices {
            if let deadline = deadlines[index], deadline <= now { add(index, .timer) }
        }
    }

    private mutating func add(_ loop: Int, _ ready: SimulatedReadiness) {
        if count < candidates.count {
            candidates[count] = (loop, ready)
        } else {
            candidates.append((loop, ready))
        }
        count += 1
    }
}

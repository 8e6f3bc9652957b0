import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

// Clock jumps (`SimulationFault.clockJump`). The simulation has one clock, the loops' monotonic
// one (no wall clock: `Date()` reads the machine's), so a jump moves it forward as a suspended
// machine finds it on waking: timers and packets due in the gap run late, at once, in deadline order.
extension Simulation {
    /// Plans a jump of `by` nanoseconds at virtual time `at` (one already passed: at the next step).
    func planClockJump(by: UInt64, at: UInt64) {
        let index = clockJumps.firstIndex { $0.at > at } ?? clockJumps.endIndex
        clockJumps.insert((at, by), at: index)
    }

    /// Makes the first planned jump due at or before `limit` (virtual nanoseconds), tracing it:
    /// false when none is. Called by the driver when nothing is ready, before it moves the clock.
    func jumpClock(before limit: UInt64) -> Bool {
        guard let jump = clockJumps.first, jump.at <= limit else { return false }
        clockJumps.removeFirst()
        virtualClock.advance(to: jump.at)
        let from = now
        let (to, overflow) = from.nanoseconds.addingReportingOverflow(jump.by)
        virtualClock.advance(to: overflow ? .max : to)
        trace.append(SimulationTraceEntry(time: from, loopName: loop.name, loopIndex: 0, kind: .clockJump, payload: jump.by))
        return true
    }
}

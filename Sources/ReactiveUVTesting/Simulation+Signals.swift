import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

extension Simulation {
    /// Sends the OS signal `signal` to the simulated process at `time` (virtual, from the start of
    /// the simulation; a time passed counts as now), as `kill` from outside would: every
    /// `Signal.unixSignals` subscription watching it, on any of the simulation's loops, gets it
    /// (on its own loop). It is a callback of `loop` (a timer, or queued work for now), in the
    /// trace with the signal's number. When
    /// nothing watches a signal whose default action kills, `finish()` reports it (a real process
    /// would have died); one ignored by default (SIGCHLD, SIGURG, SIGWINCH, SIGCONT, the stops) is dropped.
    ///
    /// - Throws: `SimulationMisuse` for a number outside 1...64 or a negative time; nothing is sent.
    ///
    /// Thread rule: the driving thread, or a callback of the simulation's loops.
    public func send(signal: Int32, at time: Duration) throws(SimulationMisuse) {
        if !(1...64).contains(signal) { throw SimulationMisuse("send(signal:at:): the signal must be in 1...64, got \(signal)") }
        if time < .zero { throw SimulationMisuse("send(signal:at:): the time must not be negative, got \(time)") }
        try arm(at: time, what: "send(signal:at:)") { [system] loop in system.raise(signal, from: loop) }
    }

    /// Runs `body` as a timer of `loop` at `time` (a time passed counts as now), from the driving
    /// thread or from a callback of any of the simulation's loops.
    func arm(at time: Duration, what: String, _ body: @escaping @Sendable (EventLoop) -> Void) throws(SimulationMisuse) {
        let target = UInt64(clamping: time.clampedNanoseconds)
        let delay = Duration.nanoseconds(Int64(clamping: target > now.nanoseconds ? target - now.nanoseconds : 0))
        let loop = self.loop
        let arm: @Sendable () -> Void = {
            _ = loop.schedule(after: delay) { body(loop) }
        }
        if EventLoop.current === loop {
            arm()
        } else if let current = EventLoop.current, loops.contains(where: { $0 === current }) {
            loop.execute(arm)
        } else {
            do {
                try perform(on: loop, arm)
            } catch let misuse as SimulationMisuse {
                throw misuse
            } catch {
                throw SimulationMisuse("\(what): \(error)")
            }
        }
    }
}

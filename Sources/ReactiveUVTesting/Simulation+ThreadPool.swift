import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// How long the simulated thread pool's jobs take: each `ThreadPool.run` job's result reaches its loop
/// `workDuration` plus a part of `jitter` drawn from the seed after its work ran.
///
/// Thread rule: a value; safe from any thread.
public struct SimulationThreadPool: Sendable, Equatable {
    /// The least time from a job's work to its result on the loop (default 1 ms).
    public var workDuration: Duration
    /// The most a job's time exceeds `workDuration`, drawn per job (default none).
    public var jitter: Duration

    /// Durations as given; `Simulation.setThreadPool(_:)` checks them.
    ///
    /// Thread rule: safe from any thread.
    public init(workDuration: Duration = .milliseconds(1), jitter: Duration = .zero) {
        self.workDuration = workDuration
        self.jitter = jitter
    }

    /// What is wrong with these durations, or nil.
    var refusal: String? {
        if workDuration < .zero { return "workDuration must not be negative, got \(workDuration)" }
        if jitter < .zero { return "jitter must not be negative, got \(jitter)" }
        return nil
    }
}

extension Simulation {
    /// How long the simulated pool's jobs take (`ThreadPool.run` on this simulation's loops).
    ///
    /// A job's work runs as a callback of the simulation (a `pool work` trace entry naming the loop that
    /// queued it), on the driving thread with no loop current, one at a time: it is never concurrent with
    /// the loops or another job. Every queued job is ready at once (the pool has no size); where several
    /// callbacks are ready the seed picks, as for the loops' own.
    ///
    /// Thread rule: the driving thread.
    public var threadPool: SimulationThreadPool {
        SimulationThreadPool(workDuration: system.threadPool.workDuration, jitter: system.threadPool.jitter)
    }

    /// Sets how long the jobs whose work runs from now on take.
    ///
    /// - Throws: `SimulationMisuse` naming the field (a negative duration); the pool stays as it was.
    ///
    /// Thread rule: the driving thread.
    public func setThreadPool(_ settings: SimulationThreadPool) throws(SimulationMisuse) {
        if let refusal = settings.refusal { throw SimulationMisuse("setThreadPool: \(refusal)") }
        system.threadPool.workDuration = settings.workDuration
        system.threadPool.jitter = settings.jitter
    }

    /// How many `ThreadPool.run` jobs' work ran so far (disposed before it ran: not counted, never run).
    ///
    /// Thread rule: the driving thread.
    public var poolJobsRun: Int { system.threadPool.jobsRun }
}

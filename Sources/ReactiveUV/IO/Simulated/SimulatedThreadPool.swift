@_spi(SchedulerImplementation) import ReactiveUVCore
import Synchronization

/// The thread pool of a simulation's process: the jobs `ThreadPool.run` queued on its loops, waiting
/// for the simulation to run them. A job's work runs as a callback of the simulation of its own (traced
/// as pool work, the seed ordering it among the loops' callbacks) on the driving thread, with no loop
/// current, as on a pool thread; one at a time, never concurrently with anything. Its result reaches
/// its loop after a virtual duration: `workDuration` plus up to `jitter`, drawn from the seed per job.
/// The pool has no size: every queued job is ready to run.
///
/// Thread rule: the simulation's driving thread only.
package final class SimulatedThreadPool: @unchecked Sendable {
    // Sendable: touched only on the driving thread (the thread rule).

    /// How long a job's result takes to reach its loop after its work ran, before the jitter (default 1 ms).
    package var workDuration: Duration = .milliseconds(1)
    /// The most a job's duration exceeds `workDuration`, drawn per job (default none).
    package var jitter: Duration = .zero
    /// The seed's numbers for the jitter (set by the simulation).
    package var random: (() -> UInt64)?
    /// Jobs whose work ran so far.
    package private(set) var jobsRun = 0
    /// The jobs waiting to run, by the loop that queued them, each loop's in queue order (looked at
    /// before every callback; no access spans a call, so exclusivity goes unchecked).
    @exclusivity(unchecked) private var waiting: [ObjectIdentifier: [SimulatedPoolJob]] = [:]

    package init() {}

    func enqueue(_ job: SimulatedPoolJob, from loop: EventLoop) {
        waiting[ObjectIdentifier(loop), default: []].append(job)
        loop.markSimulationStale()
    }

    /// Takes `job` out of the queue; false when it was not waiting (its work ran, or it was taken already).
    @discardableResult
    func remove(_ job: SimulatedPoolJob, from loop: EventLoop) -> Bool {
        let key = ObjectIdentifier(loop)
        guard let index = waiting[key]?.firstIndex(where: { $0 === job }) else { return false }
        waiting[key]?.remove(at: index)
        if waiting[key]?.isEmpty == true { waiting[key] = nil }
        loop.markSimulationStale()
        return true
    }

    /// Whether a job `loop` queued waits to run.
    package func hasWaiting(for loop: EventLoop) -> Bool {
        !waiting.isEmpty && waiting[ObjectIdentifier(loop)] != nil
    }

    /// Runs the work of the first job `loop` queued; false when none ran (none waited, or the job had been disposed).
    package func runNext(for loop: EventLoop) -> Bool {
        let key = ObjectIdentifier(loop)
        guard var jobs = waiting[key], !jobs.isEmpty else { return false }
        let job = jobs.removeFirst()
        waiting[key] = jobs.isEmpty ? nil : jobs
        loop.markSimulationStale()
        guard job.runWork(duration: drawDuration()) else { return false }
        jobsRun += 1
        return true
    }

    private func drawDuration() -> Duration {
        let spread = jitter.clampedNanoseconds
        guard spread > 0, let random else { return workDuration }
        return workDuration + .nanoseconds(Int64(clamping: random() % (spread + 1)))
    }
}

/// A job of the simulated pool; `SimulatedPoolWork` is the one kind.
///
/// Thread rule: the simulation's driving thread.
class SimulatedPoolJob {
    /// Runs the work (no loop current) and arms the delivery of its result `duration` later; false when
    /// the job was disposed first (nothing ran).
    func runWork(duration: Duration) -> Bool { false }
}

/// `ThreadPool.run` on a simulated loop: queued in the simulation's `SimulatedThreadPool` until the
/// simulation runs its work, then its result (or what the work threw) sent to the subscriber on the loop
/// after the job's duration, by a timer of the loop. As on a real loop: disposed before its work ran, it
/// never runs; after, its result is dropped; the loop's shutdown ends it with `EventLoopError.shutDown`.
///
/// Thread rule: loop thread only (the simulation's driving thread), except `dispose()` and `disposedFlag`;
/// `runWork` runs on the driving thread between callbacks.
final class SimulatedPoolWork<Value: Sendable>: SimulatedPoolJob, LoopDisposable, @unchecked Sendable {
    // Sendable: every stored var is touched on the driving thread only (dispose() hops to the loop, whose
    // callbacks run there); `disposedFlag` is atomic.

    /// Where the job is: waiting for the pool, its result on its way (the timer), or done.
    private enum State {
        case waiting
        case delivering(timer: (any Disposable)?)
        case ended
    }

    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let pool: SimulatedThreadPool
    private let work: @Sendable () throws -> Value
    private var subscriber: Subscriber<Value>?
    private var state = State.waiting
    private var shutdownToken: (any Disposable)?

    private init(loop: EventLoop, pool: SimulatedThreadPool, work: @escaping @Sendable () throws -> Value,
                 subscriber: Subscriber<Value>) {
        self.loop = loop
        self.pool = pool
        self.work = work
        self.subscriber = subscriber
    }

    /// Queues `work` on the simulation's pool for `subscriber`; loop thread.
    static func start(on loop: EventLoop, _ work: @escaping @Sendable () throws -> Value,
                      for subscriber: Subscriber<Value>) -> (any Disposable)? {
        guard let pool = loop.simulatedSystem?.threadPool else {
            subscriber.sendError(loop.simulationRefusal("ThreadPool", what: "ThreadPool.run without a simulated system"))
            return nil
        }
        let job = SimulatedPoolWork(loop: loop, pool: pool, work: work, subscriber: subscriber)
        pool.enqueue(job, from: loop)
        job.shutdownToken = loop.shutdownObservers.add { [weak job] in job?.end(EventLoopError.shutDown(loop: loop.name)) }
        return job
    }

    override func runWork(duration: Duration) -> Bool {
        guard case .waiting = state, !disposedFlag.load(ordering: .acquiring) else { return false }
        let outcome = Result { try work() }
        // The work may have disposed its own subscription, or shut the loop down.
        guard case .waiting = state, subscriber != nil, !disposedFlag.load(ordering: .acquiring) else { return true }
        let box = UncheckedSendable(outcome)
        let timer = loop.performAsSimulatedCallback {
            loop.scheduleTimer(after: duration) { [self] in deliver(box.value) }
        }
        guard let timer else {
            end(EventLoopError.shutDown(loop: loop.name))
            return true
        }
        state = .delivering(timer: timer)
        return true
    }

    /// Sends the outcome, as the real pool's after-work callback does; loop thread.
    private func deliver(_ outcome: Result<Value, any Error>) {
        guard case .delivering = state, let subscriber = subscriber.take() else { return }
        state = .ended
        shutdownToken.take()?.dispose()
        switch outcome {
        case .success(let value):
            subscriber.sendNext(value)
            subscriber.sendCompleted()
        case .failure(let error):
            subscriber.sendError(error)
        }
    }

    private func end(_ error: any Error) {
        let ending = subscriber.take()
        abandon()
        ending?.sendError(error)
    }

    func abandon() {
        disposedFlag.store(true, ordering: .releasing)
        subscriber = nil
        switch state {
        case .waiting: pool.remove(self, from: loop)
        case .delivering(let timer): timer?.dispose()
        case .ended: break
        }
        state = .ended
        shutdownToken.take()?.dispose()
    }
}

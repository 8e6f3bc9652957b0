import ReactiveUV
import Synchronization

/// A simulation's virtual time as a Swift `Clock` (`Simulation.clock`): `Task.sleep(for:clock:)`
/// and any code taking a `Clock` wait on virtual time, each sleep a timer of a simulated loop.
///
/// A sleep's timer goes on the loop the sleeping code runs on when that loop is of this
/// simulation (a task of `loop.task`, `Task(executorPreference:)`), else on the simulation's
/// first loop; the task resumes when the simulation reaches the deadline, and a cancelled sleep
/// cancels its timer at once (the leak check sees none left).
///
/// Thread rule: a value; safe from any thread (it sleeps on the simulation's loops).
public struct SimulationClock: Clock {
    /// A point of virtual time: how long after the simulation began.
    ///
    /// Thread rule: a value; safe from any thread.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Virtual time since the simulation began.
        public let offset: Duration

        /// The instant `offset` after the simulation began.
        ///
        /// Thread rule: safe from any thread.
        public init(offset: Duration) { self.offset = offset }

        /// This instant moved by `duration`.
        ///
        /// Thread rule: safe from any thread.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }

        /// The time from this instant to `other`.
        ///
        /// Thread rule: safe from any thread.
        public func duration(to other: Instant) -> Duration { other.offset - offset }

        /// Orders instants by offset.
        ///
        /// Thread rule: safe from any thread.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }

        /// `"1.5 seconds"` after the start.
        ///
        /// Thread rule: safe from any thread.
        public var description: String { "\(offset)" }
    }

    private let loop: EventLoop
    private let virtualClock: VirtualClock

    init(loop: EventLoop, virtualClock: VirtualClock) {
        self.loop = loop
        self.virtualClock = virtualClock
    }

    /// The virtual time now.
    ///
    /// Thread rule: safe from any thread.
    public var now: Instant { Instant(offset: .nanoseconds(Int64(clamping: virtualClock.nanoseconds))) }

    /// One nanosecond: virtual time has no coarser step (a loop's timers round to the millisecond).
    ///
    /// Thread rule: safe from any thread.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Suspends until the simulation's virtual time reaches `deadline` (at once if it has);
    /// `tolerance` is ignored.
    ///
    /// - Throws: `CancellationError` when the task is cancelled (the timer is cancelled too);
    ///   `EventLoopError.shutDown` when the loop has shut down.
    ///
    /// Thread rule: safe from any task; the task resumes when the simulation runs the timer.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let waitFor = now.duration(to: deadline)
        if waitFor <= .zero { return }
        let target = EventLoop.current.flatMap { $0.virtualClock === virtualClock ? $0 : nil } ?? loop
        let sleeper = Sleeper()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard sleeper.wait(continuation) else { return }
                let timer = target.schedule(after: waitFor) { sleeper.wake(nil) }
                if let timer {
                    sleeper.keep(timer)
                } else {
                    sleeper.wake(EventLoopError.shutDown(loop: target.name))
                }
            }
        } onCancel: {
            sleeper.wake(CancellationError())
        }
    }
}

/// One sleep: its continuation and timer, resumed exactly once by the timer or by cancellation.
private final class Sleeper: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var timer: (any Disposable)?
        var outcome: (any Error)??
    }

    private let state = Mutex(State())

    /// Keeps the continuation; false (and resumed) when cancellation came first.
    func wait(_ continuation: CheckedContinuation<Void, any Error>) -> Bool {
        let early: (any Error)?? = state.withLock { state in
            if state.outcome == nil { state.continuation = continuation }
            return state.outcome
        }
        guard let early else { return true }
        if let error = early { continuation.resume(throwing: error) } else { continuation.resume() }
        return false
    }

    /// Keeps the timer, or cancels it when the sleep already ended.
    func keep(_ timer: any Disposable) {
        let over = state.withLock { state -> Bool in
            if state.outcome != nil { return true }
            state.timer = timer
            return false
        }
        if over { timer.dispose() }
    }

    /// Ends the sleep (nil: the deadline came), once; later calls do nothing.
    func wake(_ error: (any Error)?) {
        let (continuation, timer): (CheckedContinuation<Void, any Error>?, (any Disposable)?) = state.withLock { state in
            if state.outcome != nil { return (nil, nil) }
            state.outcome = .some(error)
            defer { state.continuation = nil; state.timer = nil }
            return (state.continuation, state.timer)
        }
        if error != nil { timer?.dispose() }
        guard let continuation else { return }
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
    }
}

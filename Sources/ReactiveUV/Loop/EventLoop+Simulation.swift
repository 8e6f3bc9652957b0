internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore
import Synchronization

/// The virtual time of one simulation's loops, in nanoseconds: it moves only when the
/// simulation moves it, never backwards.
///
/// Thread rule: read from any thread; moved by the thread that drives the simulation.
package final class VirtualClock: Sendable {
    private let value: Atomic<UInt64>

    /// A clock reading `nanoseconds`.
    package init(nanoseconds: UInt64 = 0) {
        value = Atomic(nanoseconds)
    }

    /// The virtual time now.
    package var nanoseconds: UInt64 { value.load(ordering: .acquiring) }

    /// Moves the clock to `nanoseconds`; an earlier time is ignored.
    package func advance(to nanoseconds: UInt64) {
        if nanoseconds > value.load(ordering: .relaxed) { value.store(nanoseconds, ordering: .releasing) }
    }
}

/// What a simulated loop has ready to run (a bit each), for its simulation to draw from.
package struct SimulatedReadiness: OptionSet, Sendable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Work the loop's own callbacks queued (`execute`, `schedule` from the loop).
    package static let queued = SimulatedReadiness(rawValue: 1)
    /// Work queued from outside the loop (another loop, the test's thread).
    package static let inbox = SimulatedReadiness(rawValue: 2)
    /// A timer due at the current virtual time.
    package static let timer = SimulatedReadiness(rawValue: 4)
    /// `shutdown()` was asked from a callback: the closing stages are due.
    package static let shutdown = SimulatedReadiness(rawValue: 8)
    /// A job this loop queued on the simulated thread pool (`ThreadPool.run`) waits to run.
    package static let pool = SimulatedReadiness(rawValue: 16)
}

/// The one callback a simulated loop ran, as its simulation traces it.
package enum SimulatedCallback: UInt8, Sendable, CustomStringConvertible {
    case queuedWork, inboxWork, taskJob, actorJob, timer, shutdown, poolWork
    /// Nothing ran: the timer that was due had been cancelled.
    case none

    package var description: String {
        switch self {
        case .queuedWork: "queued work"
        case .inboxWork: "work from outside"
        case .taskJob: "task job"
        case .actorJob: "actor job"
        case .timer: "timer"
        case .shutdown: "shutdown"
        case .poolWork: "pool work"
        case .none: "nothing"
        }
    }
}

/// A simulated loop is a real `EventLoop` (same queues, timers, handles, shutdown) whose callbacks
/// a simulation runs, one at a time, on the thread that drives it, with virtual time instead of
/// libuv's clock; libuv itself runs only to close the loop. The only branches on it are on cold
/// paths: the clock read, arming the timer driver, `run()`, `tryShutdown()`, `performAndWait`.
extension EventLoop {
    /// A loop driven by a simulation on `clock`, its TCP on `network`, its files in `files`, its
    /// child processes, standard I/O and signals in `system`: no thread of its own, no metrics.
    ///
    /// Thread rule: the simulation's driving thread.
    package static func simulated(name: String, clock: VirtualClock, network: SimulatedNetwork? = nil,
                                  files: SimulatedFileSystem? = nil, system: SimulatedSystem? = nil) -> EventLoop {
        EventLoop(name: name, ownsThread: false, isShared: false, metrics: .disabled, virtualClock: clock,
                  simulatedNetwork: network, simulatedFiles: files, simulatedSystem: system)
    }

    /// Whether a simulation drives this loop.
    ///
    /// Thread rule: safe from any thread.
    package var isSimulated: Bool { virtualClock != nil }

    /// The error of a family with no simulated backend yet, asked of a simulated loop: its libuv
    /// handle or request would never be polled, so the factory refuses instead of hanging.
    ///
    /// Thread rule: safe from any thread.
    @inline(never)
    func simulationRefusal(_ family: StaticString, what: String) -> UVError {
        UVError(code: UV_ENOTSUP.rawValue,
                message: "\(family) has no simulated backend yet: a simulated loop cannot run \(what)",
                context: "simulated loop '\(name)'")
    }

    /// Throws `simulationRefusal` on a simulated loop; nothing on a real one.
    ///
    /// Thread rule: safe from any thread.
    @inline(__always)
    func refuseIfSimulated(_ family: StaticString, what: @autoclosure () -> String) throws(UVError) {
        if virtualClock != nil { throw simulationRefusal(family, what: what()) }
    }

    /// Runs `body` with this loop as the calling thread's loop and scheduler, then restores them.
    @inline(__always)
    private func asSimulatedLoopThread<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        let previousLoop = ThreadLocals.currentLoop.value
        let previousScheduler = ThreadLocals.currentScheduler.value
        let me = Unmanaged.passUnretained(self).toOpaque()
        ThreadLocals.currentLoop.set(me)
        ThreadLocals.currentScheduler.set(me)
        defer {
            ThreadLocals.currentLoop.set(previousLoop)
            ThreadLocals.currentScheduler.set(previousScheduler)
        }
        return try body()
    }

    /// Notes that this simulated loop's readiness may have changed outside its own callbacks.
    ///
    /// Thread rule: safe from any thread.
    package func markSimulationStale() {
        simulationStale.store(true, ordering: .releasing)
    }

    /// Whether the loop was marked stale since the last call, clearing the mark.
    ///
    /// Thread rule: the simulation's driving thread, between callbacks.
    package func takeSimulationStale() -> Bool {
        simulationStale.load(ordering: .acquiring) && simulationStale.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// What is ready to run at the current virtual time; empty once the loop has closed.
    ///
    /// Thread rule: the simulation's driving thread, between callbacks.
    package func simulatedReadiness() -> SimulatedReadiness {
        simulatedLook().ready
    }

    /// `simulatedReadiness()` and `simulatedNextDeadline()` in one look, which a simulation takes
    /// of every loop before each callback: raw bits, each queue looked at once.
    ///
    /// Thread rule: the simulation's driving thread, between callbacks.
    package func simulatedLook() -> (ready: SimulatedReadiness, deadline: UInt64?) {
        let current = state.load(ordering: .acquiring)
        if current == .closed { return ([], nil) }
        var bits = current == .closeRequested ? SimulatedReadiness.shutdown.rawValue : 0
        if !localQueue.isEmpty { bits |= SimulatedReadiness.queued.rawValue }
        if withInbox({ !$0.items.isEmpty }) { bits |= SimulatedReadiness.inbox.rawValue }
        timers.dropCancelledAtTop()
        let deadline = timers.earliestDeadline
        if let deadline, deadline <= clockNanoseconds { bits |= SimulatedReadiness.timer.rawValue }
        if simulatedSystem?.threadPool.hasWaiting(for: self) == true { bits |= SimulatedReadiness.pool.rawValue }
        return (SimulatedReadiness(rawValue: bits), deadline)
    }

    /// The earliest deadline of a live timer, cancelled ones at the top dropped first; nil when none.
    ///
    /// Thread rule: the simulation's driving thread, between callbacks.
    package func simulatedNextDeadline() -> UInt64? {
        if state.load(ordering: .acquiring) == .closed { return nil }
        timers.dropCancelledAtTop()
        return timers.earliestDeadline
    }

    /// Runs one callback of the kind `ready` names, as this loop's thread.
    ///
    /// Thread rule: the simulation's driving thread, between callbacks.
    package func runSimulatedCallback(_ ready: SimulatedReadiness) -> SimulatedCallback {
        // Pool work runs as a pool thread would: no loop is current.
        if ready == .pool { return simulatedSystem?.threadPool.runNext(for: self) == true ? .poolWork : .none }
        return asSimulatedLoopThread { () -> SimulatedCallback in
            switch ready {
            case .queued:
                guard let work = localQueue.pop() else { return .none }
                return run(work, closureKind: .queuedWork)
            case .inbox:
                let taken = withInbox { inbox -> WorkItem? in
                    let work = inbox.items.pop()
                    // As `drainInbox` does on an empty look: the next producer claims a wake-up again.
                    if inbox.items.isEmpty { inbox.loopAwake = false }
                    return work
                }
                guard let work = taken else { return .none }
                return run(work, closureKind: .inboxWork)
            case .timer:
                guard let work = takeDueTimerWork(at: clockNanoseconds) else { return .none }
                work()
                armTimerDriver()
                return .timer
            default:
                drive()
                return .shutdown
            }
        }
    }

    /// Runs `body` now as a callback of this loop (the test's code, made on the loop's thread).
    ///
    /// Thread rule: the simulation's driving thread, between callbacks.
    package func performAsSimulatedCallback<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        defer { markSimulationStale() }
        return try asSimulatedLoopThread(body)
    }

    private func run(_ work: WorkItem, closureKind: SimulatedCallback) -> SimulatedCallback {
        work.run(on: self)
        switch work {
        case .closure: return closureKind
        case .taskJob: return .taskJob
        case .actorJob: return .actorJob
        }
    }

    /// The handles open now (pending timers included), for the simulation's leak check.
    ///
    /// Thread rule: the simulation's driving thread, between callbacks.
    package func simulatedOpenHandles() -> [OpenHandle] {
        if state.load(ordering: .acquiring) == .closed { return [] }
        return asSimulatedLoopThread { collectOpenHandles() }
    }

    /// `tryShutdown()` of a simulated loop from outside its callbacks: the closing stages run here.
    func shutDownSimulated() throws(EventLoopError) -> ShutdownReport {
        if state.load(ordering: .acquiring) != .closed {
            _ = transitionRequestClose(allowIdle: true)
            asSimulatedLoopThread { drive() }
            markSimulationStale()
        }
        return try finishedReport()
    }

    /// `performAndWait` on a simulated loop from its driving thread: the body runs now, as a callback.
    func performSimulatedNow<T>(_ body: (EventLoop) -> T) throws(EventLoopError) -> T {
        if state.load(ordering: .acquiring) == .closed { throw refusal }
        defer { markSimulationStale() }
        return asSimulatedLoopThread { body(self) }
    }
}

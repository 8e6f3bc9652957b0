import Foundation
import ReactiveUV

/// Subscribes to a signal and records every event with its time and the scheduler it arrived on,
/// to assert a signal's whole history and wait for events with a deadline instead of sleeping.
///
/// Thread rule: safe from any thread.
public final class EventRecorder<Value>: @unchecked Sendable {
    // Sendable: `lock` guards `state`; `notifier` is thread-safe; `subscription` is written once, before the recorder is shared.
    /// One recorded event.
    public struct Recorded: CustomStringConvertible {
        /// The time on the current scheduler's clock when it arrived (virtual time on a `TestScheduler`).
        public let time: SchedulerInstant
        /// The event.
        public let event: Event<Value>
        /// The name of the loop whose thread delivered it, or nil if not a loop thread.
        public let loopName: String?
        /// Whether it arrived on the thread of the scheduler that was current when the recorder subscribed.
        public let onHomeThread: Bool

        /// `"next(1) @ 0.001000000s"`.
        ///
        /// Thread rule: safe from any thread.
        public var description: String { "\(event) @ \(time)" }
    }

    private struct State {
        var recorded: [Recorded] = []
        var valueCount = 0
        var terminated = false
        var deliveringThread: pthread_t?
        var depth = 0
        var overlapped = false
    }

    private let lock = NSLock()
    private var state = State()
    private let notifier = Notifier()
    private var subscription: (any Disposable)?
    private let home: Scheduler?
    /// A label used in timeout messages.
    public let label: String

    /// Subscribes to `signal` from the calling thread (home: its current scheduler, else
    /// `EventLoop.shared`) and starts recording; `label` names it in messages (default: the signal's name).
    ///
    /// Thread rule: safe from any thread.
    public init(_ signal: Signal<Value>, label: String? = nil) {
        self.label = label ?? (signal.name.isEmpty ? "signal" : signal.name)
        self.home = Scheduler.current
        subscription = signal.subscribe(
            next: { [self] in record(.next($0)) },
            error: { [self] in record(.error($0)) },
            completed: { [self] in record(.completed) })
    }

    private func record(_ event: Event<Value>) {
        let entry = Recorded(time: Scheduler.current?.now ?? SchedulerInstant.now,
                             event: event,
                             loopName: EventLoop.current?.name,
                             onHomeThread: home.map { $0.isCurrent } ?? (EventLoop.current === EventLoop.shared))
        // Another thread inside a delivery means two events overlapped; nesting on one thread is a
        // re-entrant send, which is allowed.
        let me = pthread_self()
        lock.lock()
        if let other = state.deliveringThread, pthread_equal(other, me) == 0 { state.overlapped = true }
        state.deliveringThread = me
        state.depth += 1
        state.recorded.append(entry)
        if event.isTerminating { state.terminated = true } else { state.valueCount += 1 }
        lock.unlock()
        notifier.notifyAll()
        lock.lock()
        state.depth -= 1
        if state.depth == 0 { state.deliveringThread = nil }
        lock.unlock()
    }

    /// Disposes the subscription. Never waits: a callback already running on another thread
    /// may still record its event after this returns (`disposeAndWait()` waits for it).
    ///
    /// Thread rule: safe from any thread.
    public func dispose() { subscription?.dispose() }

    /// Disposes the subscription, then waits, without blocking a thread, for a callback still running
    /// on another thread: once this returns, nothing more is recorded.
    ///
    /// Thread rule: safe from any task.
    public func disposeAndWait() async { await subscription?.disposeAndWait() }

    /// The subscription's disposable.
    ///
    /// Thread rule: safe from any thread.
    public var disposable: (any Disposable)? { subscription }

    /// Every event so far, with time and thread.
    ///
    /// Thread rule: safe from any thread.
    public var recorded: [Recorded] { lock.withLock { state.recorded } }

    /// Every event so far.
    ///
    /// Thread rule: safe from any thread.
    public var events: [Event<Value>] { recorded.map(\.event) }

    /// Every value so far.
    ///
    /// Thread rule: safe from any thread.
    public var values: [Value] { recorded.compactMap(\.event.value) }

    /// The terminal event, if one arrived.
    ///
    /// Thread rule: safe from any thread.
    public var terminal: Event<Value>? { recorded.last.flatMap { $0.event.isTerminating ? $0.event : nil } }

    /// Whether two events were ever delivered at the same time (they must not be).
    ///
    /// Thread rule: safe from any thread.
    public var sawConcurrentDelivery: Bool { lock.withLock { state.overlapped } }

    /// Waits until `condition` holds for the events recorded so far (checked after every event), or
    /// throws `WaitTimeout` naming `what` and the events seen.
    ///
    /// Thread rule: any thread except the one delivering the events.
    public func wait(for what: String, timeout: Duration = LoopHarness.defaultTimeout, until condition: ([Event<Value>]) -> Bool) throws {
        let satisfied = notifier.wait(timeout: timeout) { condition(events) }
        if !satisfied {
            throw WaitTimeout(waitingFor: "\(what) from \(label)", timeout: timeout, observed: "\(events)")
        }
    }

    /// Waits until `condition` holds of an event, looking at each event once, in order: a wait
    /// over a long stream (a byte count) costs one look per event, not a copy of all of them per
    /// wake-up. `condition` runs on the waiting thread under the recorder's lock: keep it short.
    ///
    /// - Throws: `WaitTimeout` when no event satisfied it in time.
    ///
    /// Thread rule: any thread except the one delivering the events.
    public func waitScanning(for what: String, timeout: Duration = LoopHarness.defaultTimeout, _ condition: (Event<Value>) -> Bool) throws {
        var next = 0
        let satisfied = notifier.wait(timeout: timeout) {
            lock.withLock {
                while next < state.recorded.count {
                    next += 1
                    if condition(state.recorded[next - 1].event) { return true }
                }
                return false
            }
        }
        if !satisfied {
            throw WaitTimeout(waitingFor: "\(what) from \(label)", timeout: timeout, observed: "\(events.count) event(s): \(events.prefix(20))")
        }
    }

    /// Waits until at least `count` values arrived; returns the values so far.
    ///
    /// - Throws: `WaitTimeout`, also if the signal ended with fewer values.
    ///
    /// Thread rule: any thread except the one delivering the events.
    @discardableResult
    public func waitForValues(_ count: Int, timeout: Duration = LoopHarness.defaultTimeout) throws -> [Value] {
        let reached = notifier.wait(timeout: timeout) {
            lock.withLock { state.valueCount >= count || state.terminated }
        }
        let values = self.values
        if !reached || values.count < count {
            throw WaitTimeout(waitingFor: "\(count) value(s) from \(label)", timeout: timeout,
                              observed: reached ? "the signal ended first: \(events)" : "\(events.count) event(s): \(events.prefix(20))")
        }
        return values
    }

    /// Waits for the terminal event (error or completion) and returns it, or throws `WaitTimeout`.
    ///
    /// Thread rule: any thread except the one delivering the events.
    @discardableResult
    public func waitForTermination(timeout: Duration = LoopHarness.defaultTimeout) throws -> Event<Value> {
        let reached = notifier.wait(timeout: timeout) { lock.withLock { state.terminated } }
        guard reached, let terminal else {
            throw WaitTimeout(waitingFor: "error or completion from \(label)", timeout: timeout,
                              observed: "\(events.count) event(s): \(events.prefix(20))")
        }
        return terminal
    }
}

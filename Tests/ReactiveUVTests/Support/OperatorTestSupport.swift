import ReactiveUV
import ReactiveUVTesting
import XCTest

/// An error with a tag, for asserting which error arrived.
struct TestError: Error, CustomStringConvertible, Equatable {
    let tag: String
    init(_ tag: String = "boom") { self.tag = tag }
    var description: String { tag }
}

extension EventRecorder {
    /// The whole recorded history as `"event@ms"` strings (virtual milliseconds on a `TestScheduler`).
    var timeline: [String] {
        recorded.map { "\($0.event)@\($0.time.nanoseconds / 1_000_000)" }
    }
}

extension TestScheduler {
    /// Subscribes a recorder with this scheduler as the subscription's home.
    func record<Value>(_ signal: Signal<Value>) -> EventRecorder<Value> {
        performAsCurrent { EventRecorder(signal) }
    }

    /// Runs `work` at virtual time `ms` (absolute, from the scheduler's zero).
    func at(_ ms: Int, _ work: @escaping @Sendable () -> Void) {
        let target = SchedulerInstant(nanoseconds: UInt64(ms) * 1_000_000)
        schedule(after: target - now, work)
    }
}

/// A cold source on virtual time that logs when it is subscribed and disposed.
///
/// Each subscription sends `events` at their offsets (milliseconds after it
/// subscribed; offset 0 is sent synchronously inside `didSubscribe`).
final class TestSource<Value>: @unchecked Sendable {
    // `events` is immutable; `log` is locked.
    private let events: [(Int, Event<Value>)]
    let log = Locked<[String]>([])

    init(_ events: [(Int, Event<Value>)]) {
        self.events = events
    }

    /// `"subscribed@0"`, `"disposed@30"`, ... in virtual milliseconds.
    var history: [String] { log.current }

    var subscriptionCount: Int { log.current.filter { $0.hasPrefix("subscribed") }.count }

    var signal: Signal<Value> {
        Signal { [self] subscriber in
            let home = subscriber.homeScheduler
            let log = self.log
            log.withLock { $0.append("subscribed@\(home.now.nanoseconds / 1_000_000)") }
            let pending = CompoundDisposable()
            pending.add(ActionDisposable { log.withLock { $0.append("disposed@\(home.now.nanoseconds / 1_000_000)") } })
            sendScript(events, to: subscriber, on: home, pending: pending)
            return pending
        }
    }
}

/// Sends each `(milliseconds, event)` of `script` to `subscriber`: offset 0 at once, the others
/// scheduled on `home`, their timers added to `pending`.
func sendScript<Value>(_ script: [(Int, Event<Value>)], to subscriber: Subscriber<Value>, on home: Scheduler,
                       pending: CompoundDisposable) {
    let target = UncheckedBox(subscriber)
    for (offset, event) in script {
        if offset == 0 {
            subscriber.send(event)
        } else {
            let payload = UncheckedBox(event)
            pending.add(home.schedule(after: .milliseconds(offset)) { target.value.send(payload.value) })
        }
    }
}

/// Shorthand for a list of timed events.
func events<Value>(_ list: (Int, Event<Value>)...) -> [(Int, Event<Value>)] { list }

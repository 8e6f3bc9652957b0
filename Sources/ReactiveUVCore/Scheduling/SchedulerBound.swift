/// A value confined to one scheduler: read and written only where it runs (its loop's thread, or a
/// `TestScheduler` running work), so it needs no lock, and `Sendable` for closures that run there.
///
/// The per-subscription state of a custom operator: bind it to `subscriber.homeScheduler` and the
/// operator runs unchanged on a loop and on virtual time (`LoopBound` is the loop-only form).
///
/// ```swift
/// func numbered<T>(_ source: Signal<T>) -> Signal<(Int, T)> {
///     Signal { subscriber in
///         let count = SchedulerBound(0, on: subscriber.homeScheduler)
///         return source.subscribe(next: { value in
///             count.value += 1
///             subscriber.sendNext((count.value, value))
///         }, error: subscriber.sendError, completed: subscriber.sendCompleted)
///     }
/// }
/// ```
///
/// Thread rule: `value` only where `scheduler` is current (a precondition checks it); the rest from any thread.
public struct SchedulerBound<Value>: @unchecked Sendable {
    // Sendable: `value` is reached only through accessors that check `scheduler.isCurrent`.
    private let storage: Storage
    /// The scheduler the value belongs to.
    public let scheduler: Scheduler

    private final class Storage {
        var value: Value
        init(_ value: consuming Value) { self.value = value }
    }

    /// Binds `value` to `scheduler`, where alone it may be read and written.
    ///
    /// Thread rule: safe from any thread.
    public init(_ value: consuming Value, on scheduler: Scheduler) {
        storage = Storage(value)
        self.scheduler = scheduler
    }

    /// The value; reading or writing it elsewhere than where `scheduler` runs stops the program.
    ///
    /// Thread rule: only where `scheduler` is current.
    public var value: Value {
        get {
            precondition(scheduler.isCurrent, "SchedulerBound read off its scheduler")
            return storage.value
        }
        nonmutating set {
            precondition(scheduler.isCurrent, "SchedulerBound written off its scheduler")
            storage.value = newValue
        }
    }
}

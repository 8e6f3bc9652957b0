/// A subject that sends each new subscriber the last values it kept, then live events: RAC's `RACReplaySubject`.
///
/// It keeps the newest `capacity` values (all: `ReplaySubject.unbounded()`). After it ended, a new
/// subscriber gets the kept values, then the terminal event. Each value is replayed or sent live, never both.
///
/// Thread rule: `send*` and subscribing are safe from any thread.
public final class ReplaySubject<Value>: Subject<Value>, @unchecked Sendable {
    // Sendable: `capacity` is immutable; the buffer is `Subject.replay`, under the subject's lock.

    /// The number of values kept for new subscribers (`Int.max` when unbounded).
    ///
    /// Thread rule: safe from any thread.
    public let capacity: Int

    /// Creates a subject that replays its last `capacity` values; a negative capacity is reported
    /// on standard error and treated as 0.
    ///
    /// Thread rule: safe from any thread.
    public init(capacity: Int) {
        if capacity < 0 {
            reportMisuse("ReplaySubject(capacity: \(capacity)): the capacity must not be negative; using 0")
        }
        self.capacity = max(0, capacity)
        super.init(replayCapacity: self.capacity, initial: nil)
    }

    /// A subject that replays every value it was ever sent (RAC's `[RACReplaySubject subject]`); its
    /// memory grows with every value: prefer `init(capacity:)`.
    ///
    /// Thread rule: safe from any thread.
    public static func unbounded() -> ReplaySubject<Value> {
        ReplaySubject(capacity: Int.max)
    }
}

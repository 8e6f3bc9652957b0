/// A subject that sends each new subscriber the last values it kept, then live events: RAC's `RACReplaySubject`.
///
/// Bounded: it keeps at most `capacity` values (the newest). Keeping every
/// value has to be asked for by name, with `ReplaySubject.unbounded()`.
/// After it ended, a new subscriber gets the kept values and then the
/// terminal event. Replay happens on the subscriber's home thread without
/// holding the subject's lock (the values are copied out first); each value
/// is either replayed or sent live, never both.
///
/// Thread rule: `send*` and subscribing are safe from any thread.
public final class ReplaySubject<Value>: Subject<Value>, @unchecked Sendable {
    // No stored state of its own: the buffer lives in `Subject.state`, under its mutex.

    /// The number of values kept for new subscribers (`Int.max` when unbounded).
    ///
    /// Thread rule: safe from any thread.
    public let capacity: Int

    /// Creates a subject that replays its last `capacity` values.
    ///
    /// A negative capacity is a programming error: it is reported on standard
    /// error and treated as 0 (only the terminal event is replayed).
    ///
    /// - Parameter capacity: How many of the newest values to keep.
    /// - Returns: A replay subject.
    ///
    /// Thread rule: safe from any thread.
    public init(capacity: Int) {
        if capacity < 0 {
            reportMisuse("ReplaySubject(capacity: \(capacity)): the capacity must not be negative; using 0")
        }
        self.capacity = max(0, capacity)
        super.init(replayCapacity: self.capacity, initial: nil)
    }

    /// A subject that replays every value it was ever sent (RAC's `[RACReplaySubject subject]`).
    ///
    /// Its memory grows with every value for as long as it lives: prefer `init(capacity:)`.
    ///
    /// - Returns: An unbounded replay subject.
    ///
    /// Thread rule: safe from any thread.
    public static func unbounded() -> ReplaySubject<Value> {
        ReplaySubject(capacity: Int.max)
    }
}

/// A subject that always has a current value (first `initial`, then the last sent) and sends it
/// to each new subscriber first: RAC's `RACBehaviorSubject`.
///
/// Thread rule: `send*`, `value` and subscribing are safe from any thread.
public final class BehaviorSubject<Value>: Subject<Value>, @unchecked Sendable {
    // Sendable: no state of its own; the current value is `Subject.replay`'s, under the subject's lock.

    /// Creates a subject whose current value is `initial`.
    ///
    /// Thread rule: safe from any thread.
    public init(initial: Value) {
        super.init(replayCapacity: 1, initial: initial)
    }

    /// The current value (the last one sent, or the initial one).
    ///
    /// Thread rule: safe from any thread.
    public var value: Value {
        // The buffer of capacity 1 always holds the current value.
        latestReplayed!
    }
}

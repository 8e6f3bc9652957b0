/// A subject that always has a current value and sends it to each new subscriber first: RAC's `RACBehaviorSubject`.
///
/// It starts with `initial`; each `sendNext` replaces the current value.
///
/// Thread rule: `send*`, `value` and subscribing are safe from any thread.
public final class BehaviorSubject<Value>: Subject<Value>, @unchecked Sendable {
    // No state of its own: the current value is `Subject.replay`'s, under the subject's lock.

    /// Creates a subject whose current value is `initial`.
    ///
    /// - Parameter initial: The value sent to subscribers until another is sent.
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

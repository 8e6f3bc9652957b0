import Synchronization

/// What `signal.values` does when values arrive faster than the consuming task takes them.
/// A limit below 1 throws `EINVAL` at the first `next()`, before the signal is subscribed.
///
/// Thread rule: a value type; safe from any thread.
public enum ValuesBufferPolicy: Sendable, Hashable {
    /// Keep at most `limit` values waiting. A source that can pause (a TCP connection's bytes) is
    /// paused when full, or at `maxBufferedBytes` of byte chunks, and resumed at half; any other
    /// source that overflows ends the sequence with `SignalValuesError.bufferOverflow`.
    case bounded(Int)
    /// Keep the newest `limit` values, dropping older ones.
    case keepNewest(Int)
    /// Keep the oldest `limit` values, dropping newer ones.
    case keepOldest(Int)
    /// Keep everything (memory grows with the backlog). Only when asked for by name.
    case unbounded

    /// `.bounded(1024)`.
    ///
    /// Thread rule: safe from any thread.
    public static let `default` = ValuesBufferPolicy.bounded(1024)

    /// Bytes of `[UInt8]` chunks waiting in a `.bounded` buffer at which a source that can pause is paused.
    ///
    /// Thread rule: a constant; safe from any thread.
    public static let maxBufferedBytes = 256 << 10
}

/// Why `signal.values` ended with an error of its own.
///
/// Thread rule: a value type; safe from any thread.
public enum SignalValuesError: Error, Sendable, Hashable, CustomStringConvertible {
    /// More than `capacity` values were waiting and the source could not be paused.
    case bufferOverflow(capacity: Int)

    /// A sentence for a human.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .bufferOverflow(let capacity):
            return "signal.values: more than \(capacity) values were waiting for the consuming task and the source cannot pause; consume faster, or choose a larger or dropping ValuesBufferPolicy"
        }
    }
}

// Sendable values only: the consuming task may run on another thread than the signal's home loop.
extension Signal where Value: Sendable {
    /// The signal's values as an `AsyncSequence`, with the default buffer policy (`.bounded(1024)`).
    ///
    /// Iterating subscribes from the consuming task's thread (a task on a loop on that loop, others
    /// on `EventLoop.shared`); the signal's error is thrown; cancelling the task or leaving the
    /// loop early disposes the subscription.
    ///
    /// Thread rule: safe from any thread.
    public var values: SignalValues<Value> { SignalValues(signal: self, policy: .default) }

    /// The signal's values as an `AsyncSequence` with an explicit buffer policy.
    ///
    /// Thread rule: safe from any thread.
    public func values(bufferingPolicy policy: ValuesBufferPolicy) -> SignalValues<Value> {
        SignalValues(signal: self, policy: policy)
    }
}

/// A signal's values as an `AsyncSequence`; each iterator subscribes at its first `next()`.
///
/// Thread rule: iterate from one task.
public struct SignalValues<Value>: AsyncSequence, @unchecked Sendable {
    // Sendable: immutable; the signal is Sendable and the policy a value.
    /// The element type.
    public typealias Element = Value
    /// The error type.
    public typealias Failure = any Error

    let signal: Signal<Value>
    let policy: ValuesBufferPolicy

    /// Makes an iterator that subscribes on its first `next()`.
    ///
    /// Thread rule: any thread.
    public func makeAsyncIterator() -> Iterator {
        Iterator(lifetime: ValuesIteratorLifetime(ValuesChannel(signal: signal, policy: policy)))
    }

    /// Takes values from the subscription in order; dropping it (leaving the loop by `break`,
    /// `return` or a throw) disposes the subscription at once.
    ///
    /// Thread rule: use from one task.
    public struct Iterator: AsyncIteratorProtocol {
        // The only strong reference to the token (the callbacks hold the channel), so the token dies
        // with the last copy of the iterator.
        @usableFromInline let lifetime: ValuesIteratorLifetime<Value>

        /// The next value, or nil once the signal completed or the task was cancelled (buffered values dropped).
        ///
        /// - Throws: The signal's error, or `SignalValuesError`.
        ///
        /// Thread rule: from the iterating task.
        @inlinable
        public mutating func next() async throws -> Value? {
            if !Task.isCancelled, let value = lifetime.channel.takeBuffered() { return value }
            return try await lifetime.channel.next()
        }

        /// The next value, or nil at the end, waited for on the caller's executor (the form
        /// `for try await` calls: an isolated task stays on its executor between values).
        ///
        /// - Throws: The signal's error, or `SignalValuesError`.
        ///
        /// Thread rule: from the iterating task.
        @inlinable
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(any Error) -> Value? {
            // A value already buffered is taken without an async call: inlined into the loop, the
            // iteration pays no task allocation and no executor check per value.
            if !Task.isCancelled, let value = lifetime.channel.takeBuffered() { return value }
            return try await lifetime.channel.next()
        }
    }
}

/// Owned by the iterator alone; its deinit, the "loop left early" signal, disposes the
/// subscription (the channel and the subscription reference each other while the source is live).
@usableFromInline
final class ValuesIteratorLifetime<Value>: Sendable {
    @usableFromInline let channel: ValuesChannel<Value>

    init(_ channel: ValuesChannel<Value>) { self.channel = channel }

    deinit {
        // Leaving the loop is an implicit cancellation (SE-0298): stop the source now.
        channel.cancel()
    }
}

extension ValuesBufferPolicy {
    var limit: Int? {
        switch self {
        case .bounded(let limit), .keepNewest(let limit), .keepOldest(let limit): return max(1, limit)
        case .unbounded: return nil
        }
    }

    /// Why the policy cannot be used (a limit below 1), or nil.
    var refusal: UVError? {
        switch self {
        case .bounded(let limit) where limit < 1, .keepNewest(let limit) where limit < 1, .keepOldest(let limit) where limit < 1:
            return UVError(code: UVError.invalidArgumentCode,
                           message: "ValuesBufferPolicy.\(self) keeps no value: a limit must be at least 1 (or use .unbounded by name)",
                           context: "signal.values(bufferingPolicy:)")
        default:
            return nil
        }
    }
}

/// Tests only: run at the start of each delivery to a `values` channel, inside the subscriber's
/// callback; returns true to drop the value.
enum ValuesDeliveryTestHook {
    static let isSet = Atomic<Bool>(false)
    static let hook = LockedValue<(@Sendable () -> Bool)?>(nil)

    static func set(_ body: (@Sendable () -> Bool)?) {
        hook.withLock { $0 = body }
        isSet.store(body != nil, ordering: .releasing)
    }

    static func run() -> Bool {
        guard let body = hook.withLock({ $0 }) else { return false }
        return body()
    }
}

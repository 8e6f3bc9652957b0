/// One event of a signal: a value, an error, or completion (after which nothing more is sent).
///
/// Thread rule: a value type; safe from any thread when `Value` is `Sendable`.
public enum Event<Value> {
    /// A value.
    case next(Value)
    /// Failure; terminates the subscription.
    case error(any Error)
    /// Success; terminates the subscription.
    case completed

    /// Whether this event ends the subscription (`error` or `completed`).
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public var isTerminating: Bool {
        if case .next = self { return false }
        return true
    }

    /// The value of a `next` event, else nil.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public var value: Value? {
        if case .next(let value) = self { return value }
        return nil
    }

    /// The error of an `error` event, else nil.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public var error: (any Error)? {
        if case .error(let error) = self { return error }
        return nil
    }

    /// The same event with a `next` value transformed; `error` and `completed` pass through.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func map<U>(_ transform: (Value) throws -> U) rethrows -> Event<U> {
        switch self {
        case .next(let value): return .next(try transform(value))
        case .error(let error): return .error(error)
        case .completed: return .completed
        }
    }
}

extension Event: Sendable where Value: Sendable {}

extension Event: Equatable where Value: Equatable {
    /// The same case with equal values; errors are equal with the same type and description.
    ///
    /// Thread rule: safe from any thread.
    public static func == (lhs: Event, rhs: Event) -> Bool {
        switch (lhs, rhs) {
        case (.next(let a), .next(let b)): return a == b
        case (.completed, .completed): return true
        case (.error(let a), .error(let b)):
            return type(of: a) == type(of: b) && String(describing: a) == String(describing: b)
        default: return false
        }
    }
}

extension Event: CustomStringConvertible {
    /// `"next(1)"`, `"error(ENOENT: ...)"`, `"completed"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .next(let value): return "next(\(value))"
        case .error(let error): return "error(\(error))"
        case .completed: return "completed"
        }
    }
}

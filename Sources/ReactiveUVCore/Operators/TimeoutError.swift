/// A wait that ran out of time: what was waited for, for how long, and what had happened by then.
///
/// The library's one timeout error: `timeout(_:on:)` and `timeout(idle:on:)` send it, the
/// blocking `first(timeout:)`, `last(timeout:)` and `waitUntilCompleted(timeout:)` throw it, and
/// so do the test harness's waits (`WaitTimeout` is this type), with what they observed.
///
/// ```swift
/// do { _ = try signal.first(timeout: .seconds(1)) }
/// catch let error as TimeoutError { print(error) }  // "timed out after 1.0 seconds waiting for first()"
/// ```
///
/// Equal when all three fields are.
///
/// Thread rule: a value type; safe from any thread.
public struct TimeoutError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was waited for: `"first()"`, `"the signal to end (timeout operator)"`, `"3 value(s) from ticks"`.
    public let operation: String
    /// How long it waited.
    public let timeout: Duration
    /// What had happened by the deadline; empty when the waiter keeps no record.
    public let observed: String

    /// Creates a timeout error.
    ///
    /// - Parameters:
    ///   - operation: What was waited for.
    ///   - timeout: How long it waited.
    ///   - observed: What had happened by the deadline, or empty.
    ///
    /// Thread rule: safe from any thread.
    public init(operation: String, after timeout: Duration, observed: String = "") {
        self.operation = operation
        self.timeout = timeout
        self.observed = observed
    }

    /// The error `timeout(_:on:)` sends when the signal has not ended within `interval`.
    ///
    /// - Parameter interval: The operator's interval.
    /// - Returns: A timeout error for the operation `"the signal to end (timeout operator)"`.
    ///
    /// Thread rule: safe from any thread.
    public static func timeoutOperator(after interval: Duration) -> TimeoutError {
        TimeoutError(operation: "the signal to end (timeout operator)", after: interval)
    }

    /// The error `timeout(idle:on:)` sends when `interval` passed without a value.
    ///
    /// - Parameter interval: The operator's interval.
    /// - Returns: A timeout error for the operation `"the next value (idle timeout operator)"`.
    ///
    /// Thread rule: safe from any thread.
    public static func idleTimeoutOperator(after interval: Duration) -> TimeoutError {
        TimeoutError(operation: "the next value (idle timeout operator)", after: interval)
    }

    /// `"timed out after 1.0 seconds waiting for first()"`, then `"; observed: ..."` when there is a record.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        let base = "timed out after \(timeout) waiting for \(operation)"
        return observed.isEmpty ? base : "\(base); observed: \(observed)"
    }
}

/// Deprecated: `TimeoutError`. `SignalError.timedOut(after:)` builds (and in a `catch` pattern
/// matches) what `timeout(_:on:)` sends; read the interval from `timeout`.
///
/// Thread rule: a value type; safe from any thread.
@available(*, deprecated, renamed: "TimeoutError")
public typealias SignalError = TimeoutError

extension TimeoutError {
    /// Deprecated: `timeoutOperator(after:)`, spelled `SignalError.timedOut(after:)`.
    ///
    /// - Parameter interval: The operator's interval.
    /// - Returns: `TimeoutError.timeoutOperator(after: interval)`.
    ///
    /// Thread rule: safe from any thread.
    @available(*, deprecated, renamed: "timeoutOperator(after:)")
    public static func timedOut(after interval: Duration) -> TimeoutError {
        timeoutOperator(after: interval)
    }

    /// Deprecated: `init(operation:after:observed:)`, spelled `SignalWaitError.timedOut(operation:after:)`.
    ///
    /// - Parameters:
    ///   - operation: `"first()"`, `"last()"` or `"waitUntilCompleted()"`.
    ///   - after: The wait's timeout.
    /// - Returns: `TimeoutError(operation: operation, after: after)`.
    ///
    /// Thread rule: safe from any thread.
    @available(*, deprecated, renamed: "init(operation:after:observed:)")
    public static func timedOut(operation: String, after: Duration) -> TimeoutError {
        TimeoutError(operation: operation, after: after)
    }

    /// Matches any error equal to `pattern`, so `catch TimeoutError(operation: ..., after: ...)` works.
    ///
    /// - Parameters:
    ///   - pattern: The timeout error to match.
    ///   - value: The error thrown or sent.
    /// - Returns: Whether `value` is a `TimeoutError` equal to `pattern`.
    ///
    /// Thread rule: safe from any thread.
    public static func ~= (pattern: TimeoutError, value: any Error) -> Bool {
        (value as? TimeoutError) == pattern
    }
}

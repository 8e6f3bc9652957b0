/// Errors the operators themselves send.
///
/// Thread rule: a value type; safe from any thread.
public enum SignalError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `timeout(_:on:)`: the signal did not end within the time allowed.
    case timedOut(after: Duration)

    /// A sentence for a human.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .timedOut(let interval):
            return "the signal did not complete within \(interval) (timeout)"
        }
    }
}

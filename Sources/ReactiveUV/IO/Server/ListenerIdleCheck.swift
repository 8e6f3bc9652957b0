/// The repeating check behind `TCPOptions.idleTimeout` and `UnixSocketOptions.idleTimeout`.
///
/// Every quarter of the timeout it ends each connection of one listener (one loop's share)
/// that moved no byte for the timeout plus a margin: the margin covers how the idle time is
/// measured (the kernel's jiffies for TCP's `TCP_INFO`, a loop-time stamp taken a little
/// early for a Unix socket), so a connection is never closed before the timeout of real time.
///
/// Thread rule: loop thread only (the timer and its checks run on the listener's loop).
enum ListenerIdleCheck {
    /// Starts the check on `loop`; returns its timer (dispose it to stop).
    ///
    /// - Parameters:
    ///   - option: The option's name for the error (`"TCPOptions.idleTimeout"`).
    ///   - marginMilliseconds: Added to the timeout before a connection counts as idle.
    ///   - listener: The listener's accepted connections and origin, while it lives (weakly held by the caller).
    ///   - idleMilliseconds: How long `stream` moved no byte; nil when that cannot be read (it is kept).
    static func start(on loop: EventLoop, timeout: Duration, option: String, marginMilliseconds: UInt64,
                      listener: @escaping @Sendable () -> (accepted: AcceptedStreams, origin: String)?,
                      idleMilliseconds: @escaping @Sendable (StreamConnection) -> UInt64?) -> (any Disposable)? {
        let limit = UInt64(clampedMilliseconds(timeout)) + marginMilliseconds
        let period = max(timeout / 4, .milliseconds(1))
        return loop.schedule(after: period, repeatingEvery: period) {
            guard let (accepted, origin) = listener() else { return }
            for stream in accepted.open {
                guard let idle = idleMilliseconds(stream), idle >= limit else { continue }
                stream.end(.failed(UVError(
                    code: UVError.timedOutCode,
                    message: "closed after \(timeout) with no byte sent or received (\(option); idle for \(idle) ms)",
                    context: "\(origin) idle timeout")))
            }
        }
    }

    /// The refusal of a timeout that is not positive (`EINVAL` naming `option`), or nil: checked at each server's door.
    static func refusal(of timeout: Duration?, option: String, context: String) -> UVError? {
        guard let timeout, timeout <= .zero else { return nil }
        return UVError(code: UVError.invalidArgumentCode, message: "\(option) must be positive (got \(timeout))", context: context)
    }

    /// `timeout` in whole milliseconds, at most 2^32 − 1 (about 49 days).
    static func clampedMilliseconds(_ timeout: Duration) -> UInt32 {
        let (seconds, attoseconds) = timeout.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return .max }
        let total = whole + attoseconds / 1_000_000_000_000_000
        return UInt32(exactly: total) ?? .max
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A point on the monotonic clock (`CLOCK_MONOTONIC`, which libuv's `uv_hrtime` reads), or on a
/// test scheduler's virtual clock; never the wall clock, so it does not jump when the time is set.
///
/// Thread rule: a value type; safe from any thread.
public struct SchedulerInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since an arbitrary fixed origin (boot, for the real clock; zero, for virtual time).
    public var nanoseconds: UInt64

    /// Creates an instant from nanoseconds since the clock's origin.
    ///
    /// Thread rule: safe from any thread.
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// The current reading of the monotonic clock.
    ///
    /// Thread rule: safe from any thread.
    public static var now: SchedulerInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return SchedulerInstant(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
    }

    /// Whether `lhs` is earlier than `rhs`.
    ///
    /// Thread rule: safe from any thread.
    public static func < (lhs: SchedulerInstant, rhs: SchedulerInstant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    /// The instant a duration later (saturating: a huge duration gives the far future, a negative one counts as zero).
    ///
    /// Thread rule: safe from any thread.
    public static func + (lhs: SchedulerInstant, rhs: Duration) -> SchedulerInstant {
        let (sum, overflow) = lhs.nanoseconds.addingReportingOverflow(rhs.clampedNanoseconds)
        return SchedulerInstant(nanoseconds: overflow ? .max : sum)
    }

    /// The time from `rhs` to `lhs` (negative when `lhs` is earlier).
    ///
    /// Thread rule: safe from any thread.
    public static func - (lhs: SchedulerInstant, rhs: SchedulerInstant) -> Duration {
        if lhs.nanoseconds >= rhs.nanoseconds {
            return .nanoseconds(Int64(clamping: lhs.nanoseconds - rhs.nanoseconds))
        }
        return .nanoseconds(-Int64(clamping: rhs.nanoseconds - lhs.nanoseconds))
    }

    /// `"12.345678s"` from the clock's origin.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        let s = nanoseconds / 1_000_000_000, frac = nanoseconds % 1_000_000_000
        var digits = String(frac)
        while digits.count < 9 { digits = "0" + digits }
        return "\(s).\(digits)s"
    }
}

extension Duration {
    /// Whole nanoseconds, negatives clamped to zero and huge ones to `UInt64.max`, so scheduler
    /// implementations agree on how durations round.
    ///
    /// Thread rule: safe from any thread.
    @_spi(SchedulerImplementation)
    public var clampedNanoseconds: UInt64 {
        let attoseconds = self.attoseconds
        if attoseconds <= 0 { return 0 }
        let nanoseconds = attoseconds / 1_000_000_000
        return nanoseconds > Int128(UInt64.max) ? .max : UInt64(nanoseconds)
    }

    /// Whole milliseconds, rounded up so a libuv timer never fires early; negatives clamped to zero.
    package var millisecondsRoundedUp: UInt64 {
        let nanoseconds = clampedNanoseconds
        if nanoseconds == .max { return .max / 1_000_000 }
        return nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The waits between retries: exponential from a first delay up to a maximum, each shortened by a random part (jitter).
///
/// Retry number `n` (from 0) waits `initial × multiplier^n`, at most `maximum`, less a random
/// part of up to `jitter` of it: with `jitter: 0.5` a wait of 800 ms becomes one from 400 to
/// 800 ms, so clients that failed together do not come back together. The maximum is never
/// exceeded. A zero `initial` retries at once every time.
///
/// The random part is drawn from `generator`. Each subscription starts from its own copy, so a
/// seeded generator (`SeededRandomNumberGenerator` in ReactiveUVTesting) gives every
/// subscription the same waits, exactly: use one in tests, and the default system generator,
/// which spreads clients apart, in production.
///
/// ```swift
/// // 100 ms, 200, 400... up to 30 s, each between half and all of that.
/// let reconnect = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(30))
/// ```
///
/// Checked when a retry uses it: a negative delay, a maximum below `initial`, a `multiplier`
/// below 1 or not finite, or a `jitter` outside 0...1 ends the signal with a `UVError` (`EINVAL`).
///
/// Thread rule: a value; safe from any thread.
public struct Backoff: Sendable {
    /// The wait before the first retry.
    public let initial: Duration
    /// What each wait is multiplied by for the next (1 keeps them constant).
    public let multiplier: Double
    /// The longest wait, before the random part is taken off.
    public let maximum: Duration
    /// The most of each wait that is random, from 0 (none) to 1 (a wait from zero to the whole).
    public let jitter: Double
    // Copied into each subscription's state, which alone draws from it.
    let generator: any RandomNumberGenerator & Sendable

    init(initial: Duration, multiplier: Double, maximum: Duration, jitter: Double, generator: any RandomNumberGenerator & Sendable) {
        self.initial = initial
        self.multiplier = multiplier
        self.maximum = maximum
        self.jitter = jitter
        self.generator = generator
    }

    /// Waits growing from `initial` by `multiplier` up to `maximum`, each less a random part of up to `jitter` of it.
    ///
    /// - Parameters:
    ///   - initial: The wait before the first retry; not negative.
    ///   - multiplier: What each wait is multiplied by for the next; at least 1, finite.
    ///   - maximum: The longest wait; at least `initial`.
    ///   - jitter: The most of each wait that is random, from 0 to 1; 0.5 keeps at least half.
    ///   - generator: Where the random part comes from; each subscription draws from its own copy.
    /// - Returns: The backoff, checked by the retry that uses it.
    ///
    /// Thread rule: safe from any thread.
    public static func exponential(
        initial: Duration,
        multiplier: Double = 2,
        maximum: Duration,
        jitter: Double = 0.5,
        using generator: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
    ) -> Backoff {
        Backoff(initial: initial, multiplier: multiplier, maximum: maximum, jitter: jitter, generator: generator)
    }

    /// The same wait before every retry, less a random part of up to `jitter` of it.
    ///
    /// - Parameters:
    ///   - delay: The wait; not negative.
    ///   - jitter: The most of each wait that is random, from 0 to 1.
    ///   - generator: Where the random part comes from; each subscription draws from its own copy.
    /// - Returns: The backoff, checked by the retry that uses it.
    ///
    /// Thread rule: safe from any thread.
    public static func constant(
        _ delay: Duration,
        jitter: Double = 0,
        using generator: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
    ) -> Backoff {
        Backoff(initial: delay, multiplier: 1, maximum: delay, jitter: jitter, generator: generator)
    }

    /// What is wrong with these arguments, said for an `EINVAL`; nil when nothing is.
    var problem: String? {
        if initial < .zero { return "backoff delay must not be negative, got \(initial)" }
        if maximum < initial { return "backoff maximum must not be below the initial delay, got \(maximum) < \(initial)" }
        if !multiplier.isFinite || multiplier < 1 {
            return "backoff multiplier must be a finite factor of at least 1, got \(multiplier)"
        }
        if !(0...1).contains(jitter) { return "backoff jitter must be a fraction from 0 to 1, got \(jitter)" }
        return nil
    }

    /// The longest wait, `Int64.max` nanoseconds, so a grown wait never overflows.
    private static let longestNanoseconds = Double(Int64.max)

    /// The wait before retry number `retry` (from 0), drawing its random part from `generator`.
    func wait(beforeRetry retry: Int, using generator: inout any RandomNumberGenerator & Sendable) -> Duration {
        let first = Self.nanoseconds(initial)
        let cap = Swift.min(Self.nanoseconds(maximum), Self.longestNanoseconds)
        // Zero stays zero: zero times an overflowed power would be NaN.
        var wait = first == 0 ? 0 : Swift.min(first * pow(multiplier, Double(retry)), cap)
        if jitter > 0 {
            // 53 random bits: a fraction in [0, 1) that a scripted generator can choose exactly.
            let fraction = Double(generator.next() >> 11) * 0x1p-53
            wait -= wait * jitter * fraction
        }
        let rounded = wait.rounded()
        // As a Double, Int64.max rounds up to 2^63, which would not convert: hence the check.
        return .nanoseconds(rounded >= Self.longestNanoseconds ? Int64.max : Int64(rounded))
    }

    private static func nanoseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    }
}

/// When `retry(upTo:backoff:resetting:while:)` counts an attempt as a success, after which the retries and the waits start over.
///
/// Thread rule: a value; safe from any thread.
public enum RetryReset: Sendable, Equatable {
    /// Never: retries count from the first subscription, as `retry(upTo:delay:backoff:while:)` does.
    case never
    /// An attempt that sent a value: for a reconnect loop, the connection produced data.
    case onValue
    /// An attempt that failed at least this long after it was subscribed (on the home's clock):
    /// the connection stayed up that long. Not negative.
    case afterLasting(Duration)

    /// Whether an attempt that ended after `lasted`, having sent a value or not, was a success.
    func isSuccess(sentValue: Bool, lasted: Duration) -> Bool {
        switch self {
        case .never: false
        case .onValue: sentValue
        case .afterLasting(let duration): lasted >= duration
        }
    }
}

extension Signal {
    /// Re-subscribes after an error, waiting as `backoff` says, while `shouldRetry` agrees: a reconnect loop.
    ///
    /// After each error that `shouldRetry` accepts, the signal is subscribed again once the next
    /// wait of `backoff` has passed; the values of every attempt are forwarded. An attempt that
    /// `reset` counts as a success (by default one that sent a value) starts the count and the
    /// waits over, so a connection that worked for a while is retried from the first, short wait,
    /// and `count` bounds the failures in a row. The error `shouldRetry` rejects, or the one after
    /// `count` retries in a row, is forwarded. An attempt's completion completes the result.
    /// Waits run on the subscription's home clock (a loop's timers, or a `TestScheduler`'s
    /// virtual time; `subscribe(on:)` chooses another); disposing during one cancels it.
    ///
    /// ```swift
    /// // Reconnect forever: 100 ms, 200, 400... up to 30 s, jittered, from 100 ms again once
    /// // a connection delivered; an unknown host name is final.
    /// shipLines(to: "logs.internal", port: 5140)
    ///     .retry(backoff: .exponential(initial: .milliseconds(100), maximum: .seconds(30)),
    ///            while: { ($0 as? UVError) != .nameNotFound })
    /// ```
    ///
    /// RAC: `-retry:` (no wait); ReactiveSwift: `retry(upTo:interval:on:)` (constant wait);
    /// Rx: `retry(when:)` (RxSwift; RxJS: `retry({ count, delay, resetOnSuccess })`);
    /// Combine: `retry(_:)` (no wait).
    ///
    /// - Parameters:
    ///   - count: The most retries in a row without a success; not negative. By default, no limit.
    ///   - backoff: The waits; see `Backoff` for how they grow and what is random.
    ///   - reset: What counts as a success; by default an attempt that sent a value.
    ///   - shouldRetry: Called with each error on the home thread; false forwards it at once.
    ///
    /// Thread rule: safe from any thread.
    public func retry(
        upTo count: Int = .max,
        backoff: Backoff,
        resetting reset: RetryReset = .onValue,
        while shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true }
    ) -> Signal<Value> {
        let operation = "Signal.retry(upTo:backoff:resetting:while:)"
        guard count >= 0 else { return .invalidArgument("retry count must not be negative, got \(count)", in: operation) }
        if let problem = backoff.problem { return .invalidArgument(problem, in: operation) }
        if case .afterLasting(let duration) = reset, duration < .zero {
            return .invalidArgument("retry reset duration must not be negative, got \(duration)", in: operation)
        }
        return retrying(RetryPolicy(count: count, backoff: backoff, reset: reset, shouldRetry: shouldRetry))
            .debugNamed("[\(name)] -retry: \(count) backoff: \(backoff.initial)...\(backoff.maximum)")
    }

    /// `retry(upTo:backoff:resetting:while:)` and `retry(upTo:delay:backoff:while:)`, arguments checked.
    func retrying(_ policy: RetryPolicy) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = DelayedRetryState(downstream, source: self, subscription: subscription, policy: policy)
            subscription.attachRoot(state)
            state.subscribeSource()
        }
    }
}

/// A delayed retry's arguments, checked.
struct RetryPolicy: Sendable {
    // Immutable.
    let count: Int
    let backoff: Backoff
    let reset: RetryReset
    let shouldRetry: @Sendable (any Error) -> Bool
}

/// The state of one delayed retry: the retries in a row, the current attempt, the wait's timer, the trampoline.
///
/// Its scheduler is the home, so it can be the root: events, timer and teardown share a thread.
private final class DelayedRetryState<Value>: TimedState<Value, Value>, @unchecked Sendable {
    // Home thread only (the timer's scheduler is the home).
    private let source: Signal<Value>
    private let policy: RetryPolicy
    private var generator: any RandomNumberGenerator & Sendable
    private var retries = 0
    private var attemptSentValue = false
    private var attemptStart = SchedulerInstant(nanoseconds: 0)
    private let trampoline = Trampoline()

    init(_ downstream: @escaping (Event<Value>) -> Void, source: Signal<Value>, subscription: Subscription, policy: RetryPolicy) {
        self.source = source
        self.policy = policy
        self.generator = policy.backoff.generator
        super.init(downstream, scheduler: subscription.home, subscription: subscription, interval: policy.backoff.initial)
    }

    /// Subscribes the source on the trampoline (see `ResubscribeState.subscribeSource`).
    func subscribeSource() {
        trampoline.run { [self] in
            if isDone { return }
            attemptSentValue = false
            attemptStart = scheduler.now
            _ = subscription.attachChild(source) { [self] event, attempt in
                switch event {
                case .next(let value):
                    attemptSentValue = true
                    sendNext(value)
                case .completed:
                    subscription.endChild(attempt)
                    finish(.completed)
                case .error(let error):
                    subscription.endChild(attempt)
                    retryOrFail(error)
                }
            }
        }
    }

    private func retryOrFail(_ error: any Error) {
        if isDone { return }
        if policy.reset.isSuccess(sentValue: attemptSentValue, lasted: scheduler.now - attemptStart) { retries = 0 }
        guard retries < policy.count, policy.shouldRetry(error) else {
            finish(.error(error))
            return
        }
        let wait = policy.backoff.wait(beforeRetry: retries, using: &generator)
        retries += 1
        if wait == .zero {
            subscribeSource()
        } else {
            arm(after: wait)
        }
    }

    override func timerFired() {
        subscribeSource()
    }
}

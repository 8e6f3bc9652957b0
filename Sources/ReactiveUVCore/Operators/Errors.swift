/// Operators that recover from errors: `catch`, `catchTo`, `retry`, `retry(upTo:delay:backoff:while:)`;
/// the reconnect loop, `retry(upTo:backoff:resetting:while:)`, is in RetryBackoff.swift.
///
/// Re-subscription (here and in `repeat()`) goes through a trampoline: a source that fails
/// while being subscribed is re-subscribed by the loop that subscribed it, not from inside its
/// error callback, so synchronous failures use constant stack.
extension Signal {
    /// On error, switches to the signal `handler` makes from the error (RAC's `-catch:`).
    ///
    /// Values sent before the error are kept; the failed subscription is disposed before the
    /// replacement is subscribed.
    ///
    /// - Parameter handler: Makes the replacement signal, on the home thread.
    ///
    /// Thread rule: safe from any thread.
    public func `catch`(_ handler: @escaping @Sendable (any Error) -> Signal<Value>) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = OperatorState(downstream)
            subscription.attachRoot(state)
            _ = subscription.attachChild(self) { event, child in
                switch event {
                case .next(let value):
                    state.sendNext(value)
                case .completed:
                    subscription.endChild(child)
                    state.finish(.completed)
                case .error(let error):
                    subscription.endChild(child)
                    if state.isDone { return }
                    _ = subscription.attachChild(handler(error)) { event, child in
                        if event.isTerminating { subscription.endChild(child) }
                        state.forward(event)
                    }
                }
            }
        }.debugNamed("[\(name)] -catch:")
    }

    /// On error, switches to `replacement` (RAC's `-catchTo:`).
    ///
    /// - Parameter replacement: The signal subscribed after an error.
    ///
    /// Thread rule: safe from any thread.
    public func catchTo(_ replacement: Signal<Value>) -> Signal<Value> {
        `catch` { _ in replacement }.debugNamed("[\(name)] -catchTo: \(replacement.name)")
    }

    /// Re-subscribes after an error, at most `count` times; the error after the last retry is forwarded (RAC's `-retry:`).
    ///
    /// Values from every attempt are forwarded. `retry(0)` (or a negative count) forwards the first error.
    /// Unlike RAC, 0 does not mean "forever": use `retry()` for that.
    ///
    /// - Parameter count: How many times to re-subscribe.
    ///
    /// Thread rule: safe from any thread.
    public func retry(_ count: Int) -> Signal<Value> {
        resubscribing(retries: max(0, count), repeatsOnCompletion: false).debugNamed("[\(name)] -retry: \(count)")
    }

    /// Re-subscribes after every error, forever (RAC's `-retry`).
    ///
    /// - Returns: A signal that never fails; it ends only when an attempt completes.
    ///
    /// Thread rule: safe from any thread.
    public func retry() -> Signal<Value> {
        resubscribing(retries: Int.max, repeatsOnCompletion: false).debugNamed("[\(name)] -retry")
    }

    /// Re-subscribes after an error, at most `count` times, after a delay that grows by `backoff`, while `shouldRetry` says yes.
    ///
    /// The n-th retry (from 0) waits `delay × backoff^n` on the home's clock (virtual time on a
    /// `TestScheduler`): with `delay: .seconds(1), backoff: 2`, 1, 2, 4, 8... seconds, capped so
    /// no wait overflows. A zero delay re-subscribes at once. An error that `shouldRetry` rejects,
    /// or the one after the last retry, is forwarded; so are the values of every attempt.
    /// Disposing during a wait cancels it. A negative `count` or `delay`, or a `backoff` below 1
    /// (or not finite), ends the signal at once with a `UVError` (`EINVAL`). The count never
    /// resets: for a reconnect loop (a maximum wait, jitter, a fresh start after a success), use
    /// `retry(upTo:backoff:resetting:while:)`.
    ///
    /// ```swift
    /// // Up to 5 retries, 100 ms apart and doubling, but a missing file is final.
    /// Files.read(path).retry(upTo: 5, delay: .milliseconds(100), backoff: 2,
    ///                        while: { ($0 as? UVError) != .noSuchFile })
    /// ```
    ///
    /// RAC: `-retry:` (no delay, no condition); Rx: `retry(when:)`
    /// (RxSwift; RxJS: `retry({ count, delay })`); Combine: `retry(_:)` (no delay, no condition).
    ///
    /// - Parameters:
    ///   - count: The most re-subscriptions; 0 forwards the first error.
    ///   - delay: The wait before the first retry; not negative.
    ///   - backoff: What each wait is multiplied by for the next; at least 1 (1 keeps it constant).
    ///   - shouldRetry: Called with each error on the home thread; false forwards it at once.
    ///
    /// Thread rule: safe from any thread.
    public func retry(
        upTo count: Int,
        delay: Duration = .zero,
        backoff: Double = 1,
        while shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true }
    ) -> Signal<Value> {
        let operation = "Signal.retry(upTo:delay:backoff:while:)"
        guard count >= 0 else { return .invalidArgument("retry count must not be negative, got \(count)", in: operation) }
        guard delay >= .zero else { return .invalidArgument("retry delay must not be negative, got \(delay)", in: operation) }
        guard backoff.isFinite, backoff >= 1 else {
            return .invalidArgument("retry backoff must be a finite factor of at least 1, got \(backoff)", in: operation)
        }
        // No cap but Duration's, no jitter, no reset: the waits are exactly delay × backoff^n.
        let waits = Backoff(initial: delay, multiplier: backoff, maximum: .nanoseconds(Int64.max), jitter: 0,
                            generator: SystemRandomNumberGenerator())
        return retrying(RetryPolicy(count: count, backoff: waits, reset: .never, shouldRetry: shouldRetry))
            .debugNamed("[\(name)] -retry: \(count) delay: \(delay) backoff: \(backoff)")
    }

    func resubscribing(retries: Int, repeatsOnCompletion: Bool) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = ResubscribeState(downstream, source: self, subscription: subscription,
                                         retries: retries, repeatsOnCompletion: repeatsOnCompletion)
            subscription.attachRoot(state)
            state.subscribeSource()
        }
    }
}

/// The state of one `retry`/`repeat` subscription: re-subscribes the source on a trampoline.
final class ResubscribeState<Value>: OperatorState<Value> {
    // Home thread only.
    private let source: Signal<Value>
    private let subscription: Subscription
    private var retriesLeft: Int
    private let repeatsOnCompletion: Bool
    private let trampoline = Trampoline()

    init(_ downstream: @escaping (Event<Value>) -> Void, source: Signal<Value>, subscription: Subscription,
         retries: Int, repeatsOnCompletion: Bool) {
        self.source = source
        self.subscription = subscription
        self.retriesLeft = retries
        self.repeatsOnCompletion = repeatsOnCompletion
        super.init(downstream)
    }

    /// Subscribes the source; from inside a subscription in progress (a synchronous failure),
    /// only asks the trampoline to go round again.
    func subscribeSource() {
        trampoline.run { [self] in
            if isDone { return }
            _ = subscription.attachChild(source) { [self] event, attempt in
                switch event {
                case .next(let value):
                    sendNext(value)
                case .error(let error):
                    subscription.endChild(attempt)
                    if retriesLeft > 0 {
                        retriesLeft -= 1
                        subscribeSource()
                    } else {
                        finish(.error(error))
                    }
                case .completed:
                    subscription.endChild(attempt)
                    if repeatsOnCompletion {
                        subscribeSource()
                    } else {
                        finish(.completed)
                    }
                }
            }
        }
    }
}

/// Re-subscribing without recursion, for `retry` and `repeat`: a source that ends synchronously
/// inside its own subscription asks for another round instead of nesting one (constant stack).
final class Trampoline {
    // Home thread only (its owner's).
    private var running = false
    private var again = false

    /// Runs `round`, and again while a round asked for another; a call made from inside a round only asks.
    func run(_ round: () -> Void) {
        if running {
            again = true
            return
        }
        running = true
        repeat {
            again = false
            round()
        } while again
        running = false
    }
}

/// The rate limiter: `throttle(_:latest:on:)`, at most one value per interval.
///
/// Not RAC 2's `throttle(_:on:)`, which is a debounce. Timers run as the other time operators'
/// do (`TimedState`).
extension Signal {
    /// Sends at most one value per `interval`: the first value at once, then, with `latest`, the newest value of each window at its end.
    ///
    /// A value that arrives while no window is open is sent at once and opens a window of
    /// `interval`. Values in the window are dropped (`latest: false`), or the newest is kept and
    /// sent when the window ends, opening the next (`latest: true`). Completion with a kept value
    /// waits for the window's end, sends it, then completes. An error is forwarded at once and
    /// discards the kept value. An interval that is not positive ends the signal with a
    /// `UVError` (`EINVAL`).
    ///
    /// RAC: none (its `-throttle:` is a debounce); Rx: `throttle(_:latest:scheduler:)` (RxJava:
    /// `throttleFirst`, `throttleLatest`); Combine: `throttle(for:scheduler:latest:)`.
    ///
    /// - Parameters:
    ///   - interval: The window: at most one value is sent per `interval`; must be positive.
    ///   - latest: Whether the newest value of a window is sent at its end (true) or dropped (false).
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home.
    ///
    /// Thread rule: safe from any thread.
    public func throttle(_ interval: Duration, latest: Bool, on scheduler: Scheduler? = nil) -> Signal<Value> {
        guard interval > .zero else {
            return .invalidArgument("throttle interval must be positive, got \(interval)", in: "Signal.throttle(_:latest:on:)")
        }
        // Not fused: with `latest`, the completion may wait for the window's end, after the source's own.
        return operatorSignal { downstream, subscription in
            let state = RateLimitState(downstream, scheduler: scheduler ?? subscription.home,
                                       subscription: subscription, interval: interval, keepsLatest: latest)
            self.attachAsChild(of: subscription) { state.receive($0) }
        }.debugNamed("[\(name)] -throttle: \(interval) latest: \(latest)")
    }
}

/// `throttle(_:latest:)`'s state: whether a window is open (the timer is armed), and the value kept for its end.
private final class RateLimitState<Value>: TimedState<Value, Value>, @unchecked Sendable {
    // `keepsLatest` is immutable; the rest is touched on the scheduler's thread only.
    private let keepsLatest: Bool
    private var kept: Value?
    private var completionWaits = false

    init(_ downstream: @escaping (Event<Value>) -> Void, scheduler: Scheduler, subscription: Subscription,
         interval: Duration, keepsLatest: Bool) {
        self.keepsLatest = keepsLatest
        super.init(downstream, scheduler: scheduler, subscription: subscription, interval: interval)
    }

    override func handle(_ event: Event<Value>) {
        switch event {
        case .next(let value):
            if !armed {
                sendNext(value)
                if !isDone { arm(after: interval) }
            } else if keepsLatest {
                kept = value
            }
        case .error:
            kept = nil
            finish(event)
        case .completed:
            if kept == nil {
                finish(.completed)
            } else {
                completionWaits = true
            }
        }
    }

    override func timerFired() {
        // The window ended: send what it kept, which opens the next one.
        guard let value = kept else { return }
        kept = nil
        sendNext(value)
        if completionWaits {
            finish(.completed)
        } else if !isDone {
            arm(after: interval)
        }
    }

    override func didFinish() {
        super.didFinish()
        kept = nil
    }
}

/// Operators that recover from errors: `catch`, `catchTo`, `retry`.
///
/// Re-subscription (here and in `repeat()`) goes through a trampoline: a
/// source that fails synchronously while it is being subscribed is
/// re-subscribed by the loop that subscribed it, not from inside its own
/// error callback, so a million synchronous failures use constant stack.
extension Signal {
    /// On error, switches to the signal `handler` makes from the error (RAC's `-catch:`).
    ///
    /// Values sent before the error are kept; the failed subscription is
    /// disposed before the replacement is subscribed.
    ///
    /// - Parameter handler: Makes the replacement signal, on the home thread.
    /// - Returns: The signal.
    ///
    /// Thread rule: safe from any thread.
    public func `catch`(_ handler: @escaping @Sendable (any Error) -> Signal<Value>) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = OperatorState(downstream)
            subscription.root = state
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
    /// - Returns: The signal.
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
    /// - Returns: The signal.
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

    func resubscribing(retries: Int, repeatsOnCompletion: Bool) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = ResubscribeState(downstream, source: self, subscription: subscription,
                                         retries: retries, repeatsOnCompletion: repeatsOnCompletion)
            subscription.root = state
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
    private var subscribing = false
    private var subscribeAgain = false

    init(_ downstream: @escaping (Event<Value>) -> Void, source: Signal<Value>, subscription: Subscription,
         retries: Int, repeatsOnCompletion: Bool) {
        self.source = source
        self.subscription = subscription
        self.retriesLeft = retries
        self.repeatsOnCompletion = repeatsOnCompletion
        super.init(downstream)
    }

    /// Subscribes the source; when called from inside a subscription in progress
    /// (a synchronous failure), only flags the loop below to go round again.
    func subscribeSource() {
        if subscribing {
            subscribeAgain = true
            return
        }
        subscribing = true
        repeat {
            subscribeAgain = false
            if isDone { break }
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
        } while subscribeAgain
        subscribing = false
    }
}

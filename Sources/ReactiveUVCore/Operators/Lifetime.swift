import Synchronization

/// Lifetime hooks: `on(starting:started:event:failed:completed:interrupted:terminated:disposed:value:)`
/// (ReactiveSwift's `on(...)`), `take(during:)` and the `Lifetime` it takes.
extension Signal {
    /// Runs the given blocks as the subscription goes through its life, before passing each event on.
    ///
    /// Each block runs on the subscription's home thread:
    /// - `starting`: before this signal is subscribed (RAC's `-initially:`);
    /// - `started`: once it has been subscribed (after any events it sent at once);
    /// - `event`: with every event, then `value` with each value, `failed`
    ///   with the error, `completed` on completion (RAC's `-doNext:`,
    ///   `-doError:`, `-doCompleted:`);
    /// - `interrupted`: when the subscription is disposed before an error or completion;
    /// - `terminated`: once, after `failed`, `completed` or `interrupted` (RAC's `-finally:`,
    ///   which misses an interruption);
    /// - `disposed`: when the subscription is disposed for any reason: the last block to run.
    ///
    /// RAC: `-initially:`, `-doNext:`, `-doError:`, `-doCompleted:`,
    /// `-finally:` (ReactiveSwift: `on(...)`); Rx: `do(onNext:onError:onCompleted:onSubscribe:onSubscribed:onDispose:)`;
    /// Combine: `handleEvents(receiveSubscription:receiveOutput:receiveCompletion:receiveCancel:receiveRequest:)`.
    ///
    /// - Parameters:
    ///   - starting: Before subscribing this signal.
    ///   - started: After subscribing it.
    ///   - event: With every event.
    ///   - failed: With the error.
    ///   - completed: On completion.
    ///   - interrupted: On disposal before a terminal event.
    ///   - terminated: On error, completion or interruption.
    ///   - disposed: On disposal.
    ///   - value: With each value.
    /// - Returns: The same events, with the side effects.
    ///
    /// Thread rule: safe from any thread.
    public func on(
        starting: (@Sendable () -> Void)? = nil,
        started: (@Sendable () -> Void)? = nil,
        event: (@Sendable (Event<Value>) -> Void)? = nil,
        failed: (@Sendable (any Error) -> Void)? = nil,
        completed: (@Sendable () -> Void)? = nil,
        interrupted: (@Sendable () -> Void)? = nil,
        terminated: (@Sendable () -> Void)? = nil,
        disposed: (@Sendable () -> Void)? = nil,
        value: (@Sendable (Value) -> Void)? = nil
    ) -> Signal<Value> {
        // Attaches this signal in the same subscription (as `lift` does), so that `started` can run after it.
        operatorSignal { downstream, subscription in
            starting?()
            let ended = Flag()
            self.attach(ClosureObserver(event: { received in
                event?(received)
                switch received {
                case .next(let next):
                    value?(next)
                case .error(let error):
                    ended.isSet = true
                    failed?(error)
                    terminated?()
                case .completed:
                    ended.isSet = true
                    completed?()
                    terminated?()
                }
                downstream(received)
            }), to: subscription)
            if interrupted != nil || terminated != nil || disposed != nil {
                // Added after the source's disposables, so it runs after them at teardown. `ended`
                // is shared with the observer above on the home thread: boxed for the hand-over.
                let ended = UncheckedSendable(ended)
                subscription.add(ActionDisposable {
                    if !ended.value.isSet {
                        ended.value.isSet = true
                        interrupted?()
                        terminated?()
                    }
                    disposed?()
                })
            }
            started?()
        }.debugNamed("[\(name)] -on:")
    }

    /// Sends values until `lifetime` ends, then completes and disposes this signal.
    ///
    /// A lifetime that has already ended completes the result at once, without subscribing to
    /// this signal. Errors and completion of this signal pass through.
    ///
    /// RAC: `-takeUntil:` with `-rac_willDeallocSignal` (ReactiveSwift:
    /// `take(during:)`); Rx: `take(until:)` with a dispose bag's signal;
    /// Combine: `prefix(untilOutputFrom:)`.
    ///
    /// - Parameter lifetime: The lifetime that bounds the subscription.
    ///
    /// Thread rule: safe from any thread.
    public func take(during lifetime: Lifetime) -> Signal<Value> {
        take(until: lifetime.ended).debugNamed("[\(name)] -takeDuring:")
    }
}

/// How long something lives: it ends when its `Token` is released or disposed (ReactiveSwift's `Lifetime`).
///
/// Keep the token in the object whose life it measures; hand the lifetime to `take(during:)` so
/// subscriptions end with the object.
///
/// ```swift
/// final class Screen {
///     private let (lifetime, token) = Lifetime.make()
///     init(ticks: Signal<Int>) {
///         _ = ticks.take(during: lifetime).subscribeNext { print($0) }  // ends when the Screen goes
///     }
/// }
/// ```
///
/// Thread rule: safe from any thread; a lifetime may end on any thread, and each
/// subscriber hears of it on its own home thread.
public final class Lifetime: @unchecked Sendable {
    // `endedSubject` is a thread-safe subject; `hasEndedFlag` is atomic.
    private let endedSubject = Subject<Void>()
    private let hasEndedFlag = Atomic<Bool>(false)

    private init() {}

    /// Makes a lifetime and the token that keeps it going.
    ///
    /// - Returns: The lifetime, and the token whose release or `dispose()` ends it.
    ///
    /// Thread rule: safe from any thread.
    public static func make() -> (lifetime: Lifetime, token: Token) {
        let lifetime = Lifetime()
        return (lifetime, Token(lifetime))
    }

    /// Completes (sending no value) when the lifetime ends; at once for a lifetime that has ended.
    ///
    /// Thread rule: safe from any thread.
    public var ended: Signal<Void> { endedSubject }

    /// Whether the lifetime has ended.
    ///
    /// Thread rule: safe from any thread.
    public var hasEnded: Bool { hasEndedFlag.load(ordering: .acquiring) }

    /// Runs `action` when the lifetime ends (at once, on the subscription's home, if it has).
    ///
    /// - Parameter action: Called once, on the home thread of the calling thread's subscription.
    /// - Returns: A disposable that cancels the observation.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func observeEnded(_ action: sending @escaping () -> Void) -> any Disposable {
        ended.subscribeCompleted(action)
    }

    fileprivate func end() {
        guard !hasEndedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
        endedSubject.sendCompleted()
    }

    /// Keeps a `Lifetime` going: the lifetime ends when the token is released or disposed.
    ///
    /// Thread rule: safe from any thread.
    public final class Token: Disposable, @unchecked Sendable {
        // `lifetime` is immutable (and thread-safe).
        private let lifetime: Lifetime

        fileprivate init(_ lifetime: Lifetime) {
            self.lifetime = lifetime
        }

        deinit { lifetime.end() }

        /// Ends the lifetime now; later calls do nothing.
        ///
        /// Thread rule: safe from any thread.
        public func dispose() { lifetime.end() }

        /// Whether the lifetime has ended.
        ///
        /// Thread rule: safe from any thread.
        public var isDisposed: Bool { lifetime.hasEnded }
    }
}

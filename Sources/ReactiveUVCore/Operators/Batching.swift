/// Batching by time, or by count or time: `buffer(every:on:)` and `buffer(every:count:on:)`.
///
/// A batch (a window) opens with the first value after a send and is sent when it is full or
/// its time is up, so no empty array is ever sent and no value waits longer than the interval.
/// The state lives on the timer's scheduler (`TimedState`). The source runs in a child
/// subscription: its end must not cancel the hop that carries its completion, and so the last
/// batch, to a scheduler that is not the home.
extension Signal {
    /// Collects values into arrays sent every `interval` (RAC's `-bufferWithTime:onScheduler:`).
    ///
    /// A window opens with the first value after a flush and is sent `interval` later; no empty
    /// arrays are sent. Completion sends what is buffered, then completes; an error is forwarded
    /// at once and discards it (as RAC). An interval that is not positive ends the signal with a
    /// `UVError` (`EINVAL`).
    ///
    /// - Parameters:
    ///   - interval: The window length; must be positive.
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home.
    /// - Returns: A signal of non-empty arrays.
    ///
    /// Thread rule: safe from any thread.
    public func buffer(every interval: Duration, on scheduler: Scheduler? = nil) -> Signal<[Value]> {
        guard interval > .zero else {
            return .invalidArgument("buffer interval must be positive, got \(interval)", in: "Signal.buffer(every:)")
        }
        return batched(every: interval, count: Int.max, on: scheduler).debugNamed("[\(name)] -bufferWithTime: \(interval)")
    }

    /// Sends the values in arrays of at most `count`, each sent when it is full or `interval` after its first value, whichever comes first.
    ///
    /// The batching a client of a network service wants: a busy source sends full batches at
    /// once, a quiet one sends what it has within `interval`. A window opens with the first value
    /// after a send, so no empty array is ever sent and a value waits at most `interval`.
    /// Completion sends the open window's values, then completes. An error is forwarded at once
    /// and the open window's values are dropped, as RAC's `-bufferWithTime:` and ReactiveSwift's
    /// `collect` do; to keep them, turn the error into completion before this operator (`catch`).
    /// Disposing drops them and cancels the timer. A count or interval that is not positive ends
    /// the signal at once with a `UVError` (`EINVAL`), without subscribing to this one.
    ///
    /// ```swift
    /// // Ship log lines 500 at a time, or whatever came within 200 ms.
    /// lines.buffer(every: .milliseconds(200), count: 500)
    /// ```
    ///
    /// RAC: `-bufferWithTime:onScheduler:` (time only); ReactiveSwift: `collect(count:)`,
    /// `collect(every:on:)` (one or the other); Rx: `buffer(timeSpan:count:scheduler:)` (RxSwift,
    /// whose windows are periodic and may be empty; RxJava: `buffer(timespan, unit, count)`);
    /// Combine: `collect(.byTimeOrCount(_:_:_:))`.
    ///
    /// - Parameters:
    ///   - interval: The longest a window stays open, from its first value; must be positive.
    ///   - count: The most values in one array; must be positive.
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home
    ///     (a loop's timers, or a `TestScheduler`'s virtual time).
    /// - Returns: A signal of non-empty arrays of at most `count` values.
    ///
    /// Thread rule: safe from any thread.
    public func buffer(every interval: Duration, count: Int, on scheduler: Scheduler? = nil) -> Signal<[Value]> {
        let operation = "Signal.buffer(every:count:on:)"
        guard count > 0 else { return .invalidArgument("buffer count must be positive, got \(count)", in: operation) }
        guard interval > .zero else { return .invalidArgument("buffer interval must be positive, got \(interval)", in: operation) }
        return batched(every: interval, count: count, on: scheduler).debugNamed("[\(name)] -buffer: \(interval) count: \(count)")
    }

    private func batched(every interval: Duration, count: Int, on scheduler: Scheduler?) -> Signal<[Value]> {
        operatorSignal { downstream, subscription in
            let state = BatchState(downstream, scheduler: scheduler ?? subscription.home,
                                   subscription: subscription, interval: interval, limit: count)
            // The open window's values go with the subscription, not when a cancelled timer is dropped.
            state.releaseAtTeardown()
            self.attachAsChild(of: subscription) { state.receive($0) }
        }
    }
}

/// The state of one `buffer(every:)` or `buffer(every:count:)` subscription: the open window's values.
private final class BatchState<Value>: TimedState<Value, [Value]>, @unchecked Sendable {
    // `limit` is immutable; `values` is touched on the scheduler's thread only.
    private let limit: Int
    private var values: [Value] = []

    init(_ downstream: @escaping (Event<[Value]>) -> Void, scheduler: Scheduler, subscription: Subscription,
         interval: Duration, limit: Int) {
        self.limit = limit
        super.init(downstream, scheduler: scheduler, subscription: subscription, interval: interval)
    }

    override func handle(_ event: Event<Value>) {
        switch event {
        case .next(let value):
            if isDone { return }
            values.append(value)
            if values.count >= limit {
                flush()
            } else if values.count == 1 {
                arm(after: interval)
            }
        case .error(let error):
            values = []
            finish(.error(error))
        case .completed:
            flush()
            finish(.completed)
        }
    }

    override func timerFired() {
        flush()
    }

    /// Sends the open window, if it has values, and closes it; the window is emptied first, so a
    /// value sent back into the source while the batch is delivered opens the next one.
    private func flush() {
        disarm()
        if values.isEmpty { return }
        let batch = values
        values = []
        sendNext(batch)
    }

    override func didFinish() {
        super.didFinish()
        values = []
    }
}

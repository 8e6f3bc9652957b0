/// Operators that move events to another scheduler's thread: `deliver(on:)` and `subscribe(on:)`.
///
/// These are the only operators that change the thread downstream code runs
/// on. Operators after them run on the new thread. Operators with several
/// inputs or timers keep their state on the subscription's home (or their
/// explicit scheduler) and hop events back there, so they stay safe after a
/// thread change; give a time operator the same scheduler (`throttle(_:on:)`)
/// to keep it on the new thread.
extension Signal {
    /// Delivers every event on `scheduler` (RAC's `-deliverOn:`).
    ///
    /// Each event is handed to `scheduler.schedule`, in order, so downstream
    /// operators and the subscriber's callbacks run on `scheduler`'s thread (a
    /// loop's thread: the events then arrive on the next turn of that loop,
    /// even when it is the home). If `scheduler` is a loop that has shut
    /// down, the subscriber gets `EventLoopError.shutDown` instead (on the
    /// source's thread: nothing runs on that loop any more). Events not yet
    /// delivered when the subscription is disposed are dropped, and no callback begins after
    /// `dispose()` returns; `dispose()` never waits for a callback already running on
    /// `scheduler`'s thread, `disposeAndWait()` does (suspending, not blocking; see the
    /// threading article). One allocation per event (the
    /// hand-off); use it at the end of a chain. The terminal event is handed
    /// off too: the result ends on `scheduler` after the values before it.
    /// The values cross to another thread, so they must be `Sendable`.
    ///
    /// - Parameter scheduler: Where downstream runs.
    /// - Returns: The same events, on `scheduler`.
    ///
    /// Thread rule: safe from any thread.
    public func deliver(on scheduler: Scheduler) -> Signal<Value> where Value: Sendable {
        // Not fused: the source's terminal event must end only the source while
        // its hand-off to `scheduler` is still on the way, so the source gets a child subscription.
        operatorSignal { downstream, subscription in
            let target = UncheckedSendable(downstream)
            let source = subscription.makeChild()
            self.attach(ClosureObserver(event: { event in
                if event.isTerminating { subscription.endChild(source) }
                let payload = UncheckedSendable(event)
                let scheduled = scheduler.schedule {
                    if subscription.isDisposed { return }
                    target.value(payload.value)
                }
                // A loop answers nil only when it refused (it has closed; other schedulers answer
                // nil after running the work at once): nothing runs there any more, so the
                // subscriber is told why here, once, instead of never hearing the end.
                if scheduled == nil, let loop = scheduler.loopLifecycle, !subscription.isDisposed {
                    target.value(.error(loop.refusalError))
                    subscription.dispose()
                }
            }), to: source)
        }.debugNamed("[\(name)] -deliverOn: \(scheduler.schedulerDescription)")
    }

    /// Subscribes to this signal on `scheduler` (RAC's `-subscribeOn:`).
    ///
    /// The source is attached in a child subscription whose home is
    /// `scheduler`: its `didSubscribe` runs on that thread, sends from other
    /// threads are hopped there, and so its events (and everything downstream)
    /// arrive on `scheduler`'s thread. Disposing tears the source down on
    /// `scheduler`'s thread. The values are made on `scheduler`'s thread and
    /// used on others downstream, so they must be `Sendable`.
    ///
    /// - Parameter scheduler: Where the source is subscribed and delivers.
    /// - Returns: The same events, produced on `scheduler`.
    ///
    /// Thread rule: safe from any thread.
    public func subscribe(on scheduler: Scheduler) -> Signal<Value> where Value: Sendable {
        operatorSignal { downstream, subscription in
            let remote = Subscription(home: scheduler)
            subscription.add(remote)
            self.start(ClosureObserver(event: downstream), on: remote)
        }.debugNamed("[\(name)] -subscribeOn: \(scheduler.schedulerDescription)")
    }
}

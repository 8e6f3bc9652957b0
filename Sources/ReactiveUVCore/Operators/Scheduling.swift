/// Operators that move events to another scheduler's thread: `deliver(on:)` and `subscribe(on:)`.
///
/// The only operators that change the thread downstream code runs on. Operators with several
/// inputs or timers keep their state on the home (or their explicit scheduler) and hop events
/// back there; give a time operator the same scheduler to keep it on the new thread.
extension Signal {
    /// Delivers every event on `scheduler` (RAC's `-deliverOn:`).
    ///
    /// Each event, the terminal one included, is handed to `scheduler.schedule` in order, so
    /// what follows runs on `scheduler`'s thread (on a loop, at its next turn, even when it is
    /// the home). A loop that has shut down sends `EventLoopError.shutDown` instead, on the
    /// source's thread. Events not yet delivered at disposal are dropped; `disposeAndWait()`
    /// waits for a callback already running there. Each event is handed off on its own, so use
    /// it at the end of a chain. Values cross threads, so they must be `Sendable`.
    ///
    /// - Parameter scheduler: Where downstream runs.
    /// - Returns: The same events, on `scheduler`.
    ///
    /// Thread rule: safe from any thread.
    public func deliver(on scheduler: Scheduler) -> Signal<Value> where Value: Sendable {
        // Not fused: the source's terminal event ends only its child subscription while the hand-off is on the way.
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
                // A loop answers nil only when it refused (it has closed): tell the subscriber
                // here, once, rather than never.
                if scheduled == nil, let loop = scheduler.loopLifecycle, !subscription.isDisposed {
                    target.value(.error(loop.refusalError))
                    subscription.dispose()
                }
            }), to: source)
        }.debugNamed("[\(name)] -deliverOn: \(scheduler.schedulerDescription)")
    }

    /// Subscribes to this signal on `scheduler` (RAC's `-subscribeOn:`).
    ///
    /// The source is attached in a child subscription whose home is `scheduler`: its
    /// `didSubscribe`, its events, everything downstream and its teardown run on that thread.
    /// Values cross threads, so they must be `Sendable`.
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

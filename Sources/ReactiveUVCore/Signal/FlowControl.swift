import Synchronization

/// Lets a consumer pause and resume a source that supports it (a TCP connection's reads).
///
/// A source registers one with `Subscriber.setFlowControl(pause:resume:)`; consumers at the end of
/// the same fused chain find it on the subscription. The source is paused while the consumer
/// asked, or while more than `transitHighWater` of its values wait for another home loop (until
/// `transitLowWater` remain).
///
/// Thread rule: `pause()` and `resume()` are safe from any thread; the source's
/// closures always run on the thread that registered them (the source's loop).
public final class FlowControl: @unchecked Sendable {
    // Sendable: `sourceScheduler`, the closures and `inTransit` are immutable or atomic; the pause
    // state and `appliedRequest` are touched only on `sourceScheduler`'s thread.
    /// Where the source registered and its closures run; the home may be another loop.
    let sourceScheduler: Scheduler
    private let pauseBody: () -> Void
    private let resumeBody: () -> Void
    private var consumerPaused = false
    private var transitPaused = false
    private var sourcePaused = false
    /// The newest numbered consumer request applied.
    private var appliedRequest = 0
    /// Values hopped from the source's thread to the subscription's home and not yet delivered.
    private let inTransit = Atomic<Int>(0)
    /// Set on the home thread by a buffering consumer that reports later when its task took the
    /// end: the source then waits for `endTaken()`.
    package let consumerTakesEndLater = Atomic<Bool>(false)
    /// What the source runs, on its thread, once the consumer has taken the end.
    private var endTakenBody: (() -> Void)?

    /// Values queued for another loop above which the source is paused.
    public static let transitHighWater = 64
    /// Values still queued for another loop at which a source paused for that reason resumes.
    public static let transitLowWater = 16

    package init(sourceScheduler: Scheduler, pause: @escaping () -> Void, resume: @escaping () -> Void) {
        self.sourceScheduler = sourceScheduler
        self.pauseBody = pause
        self.resumeBody = resume
    }

    /// Asks the source to stop producing until `resume()`.
    ///
    /// Thread rule: safe from any thread.
    public func pause() { onSourceThread { $0.consumerPaused = true } }

    /// Lets a paused source produce again (unless its home loop is still behind).
    ///
    /// Thread rule: safe from any thread.
    public func resume() { onSourceThread { $0.consumerPaused = false } }

    /// A consumer's pause or resume, numbered: requests from the home thread and the consuming task
    /// may arrive out of order, and only the newest counts.
    package func setConsumerPaused(_ paused: Bool, request: Int) {
        onSourceThread { control in
            guard request > control.appliedRequest else { return }
            control.appliedRequest = request
            control.consumerPaused = paused
        }
    }

    /// Runs `body` on the source's thread once the consumer has taken the end (at once for a consumer
    /// that does not buffer). Call on the source's thread after the completion; the check hops to the
    /// home behind it.
    package func whenEndTaken(home: Scheduler, _ body: @escaping () -> Void) {
        endTakenBody = body
        if home.isCurrent {
            if !consumerTakesEndLater.load(ordering: .acquiring) { endTaken() }
            return
        }
        home.scheduleDroppingIfShutDown { [self] in
            if !consumerTakesEndLater.load(ordering: .acquiring) { endTaken() }
        }
    }

    /// The consumer has taken the end (its task saw the sequence finish): the source's `whenEndTaken` body runs.
    package func endTaken() {
        onSourceThread { control in
            let body = control.endTakenBody
            control.endTakenBody = nil
            body?()
        }
    }

    /// Counts one value about to be queued for the subscription's home loop (source thread).
    func willQueueValue() {
        let queued = inTransit.wrappingAdd(1, ordering: .relaxed).newValue
        if queued >= FlowControl.transitHighWater && !transitPaused && sourceScheduler.isCurrent {
            transitPaused = true
            update()
        }
    }

    /// Counts one queued value as delivered (subscription's home thread).
    func didDeliverQueuedValue() {
        let queued = inTransit.wrappingSubtract(1, ordering: .relaxed).newValue
        // Every drain from above the high-water mark passes the low-water mark exactly once.
        if queued == FlowControl.transitLowWater {
            onSourceThread { control in
                if control.transitPaused && control.inTransit.load(ordering: .relaxed) <= FlowControl.transitLowWater {
                    control.transitPaused = false
                }
            }
        }
    }

    /// Runs `change` on the source's thread, then pauses or resumes the source to match.
    private func onSourceThread(_ change: @escaping (FlowControl) -> Void) {
        if sourceScheduler.isCurrent {
            change(self)
            update()
        } else {
            let box = UncheckedSendable(change)
            // A source whose loop has shut down has ended: nothing is left to pause or resume.
            sourceScheduler.scheduleDroppingIfShutDown { [self] in
                box.value(self)
                update()
            }
        }
    }

    private func update() {
        let shouldPause = consumerPaused || transitPaused
        guard shouldPause != sourcePaused else { return }
        sourcePaused = shouldPause
        if shouldPause { pauseBody() } else { resumeBody() }
    }
}

extension Subscriber {
    /// Declares that this source can pause: consumers call `pause` (stop producing, for a socket
    /// stop reading) and `resume`.
    ///
    /// The closures run on the registering thread (the source's loop). With another loop as home,
    /// the source is also paused while too many of its values wait in that loop's queue.
    ///
    /// Thread rule: call from the source's thread (in `didSubscribe`, or where the source runs),
    /// before the source sends; only the first registration counts.
    public func setFlowControl(pause: sending @escaping () -> Void, resume: sending @escaping () -> Void) {
        let control = FlowControl(sourceScheduler: Scheduler.current ?? subscription.home, pause: pause, resume: resume)
        guard registerFlowControl(control) else { return }
        if subscription.home.isCurrent {
            subscription.flowControl = control
        } else {
            let box = UncheckedSendable(subscription)
            subscription.home.scheduleDroppingIfShutDown { box.value.flowControl = control }
        }
    }
}

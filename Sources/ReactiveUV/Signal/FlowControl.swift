/// Lets a consumer pause and resume a source that supports it (a TCP connection's reads).
///
/// A source registers one with `Subscriber.setFlowControl(pause:resume:)` in its
/// `didSubscribe`; consumers at the end of the same (fused) chain find it on the
/// subscription, so `map`/`filter` between them do not hide it. Consumers that
/// buffer (such as `signal.values`) pause the source instead of growing memory.
///
/// Thread rule: `pause()` and `resume()` are safe from any thread; the source's
/// closures always run on the thread that registered them (the source's loop).
public final class FlowControl: @unchecked Sendable {
    // Immutable; the closures are only called on `home`'s thread (the source's scheduler).
    private let home: Scheduler
    private let pauseBody: () -> Void
    private let resumeBody: () -> Void

    init(home: Scheduler, pause: @escaping () -> Void, resume: @escaping () -> Void) {
        self.home = home
        self.pauseBody = pause
        self.resumeBody = resume
    }

    /// Asks the source to stop producing until `resume()`.
    ///
    /// Thread rule: safe from any thread.
    public func pause() { onHome(pauseBody) }

    /// Lets a paused source produce again.
    ///
    /// Thread rule: safe from any thread.
    public func resume() { onHome(resumeBody) }

    private func onHome(_ body: @escaping () -> Void) {
        if home.isCurrent {
            body()
        } else {
            let box = UncheckedSendable(body)
            home.schedule { box.value() }
        }
    }
}

extension Subscriber {
    /// Declares that this source can pause: consumers call `pause` and `resume`.
    ///
    /// The closures run on the thread that registers them (the source's loop,
    /// which may differ from the subscription's home); the registration itself
    /// is published on the home thread, where consumers read it.
    ///
    /// - Parameters:
    ///   - pause: Stops producing (for a socket: stop reading).
    ///   - resume: Starts producing again.
    ///
    /// Thread rule: call from the source's thread (in `didSubscribe`, or where the source runs).
    public func setFlowControl(pause: @escaping () -> Void, resume: @escaping () -> Void) {
        let control = FlowControl(home: Scheduler.current ?? subscription.home, pause: pause, resume: resume)
        if subscription.home.isCurrent {
            subscription.flowControl = control
        } else {
            let box = UncheckedSendable(subscription)
            subscription.home.schedule { box.value.flowControl = control }
        }
    }
}

/// Lets a consumer pause and resume a source that supports it (a TCP connection's reads).
///
/// A source registers one with `Subscriber.setFlowControl(pause:resume:)` in its
/// `didSubscribe`; consumers at the end of the same (fused) chain find it on the
/// subscription, so `map`/`filter` between them do not hide it. Consumers that
/// buffer (such as `signal.values`) pause the source instead of growing memory.
///
/// Thread rule: `pause()` and `resume()` are safe from any thread; the source's
/// closures always run on the subscription's home thread.
public final class FlowControl: @unchecked Sendable {
    // Immutable; the closures are only called on `home`'s thread.
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
    /// Declares that this source can pause: consumers call `pause` and `resume` (on the home thread).
    ///
    /// - Parameters:
    ///   - pause: Stops producing (for a socket: stop reading).
    ///   - resume: Starts producing again.
    ///
    /// Thread rule: call from `didSubscribe` (the home thread).
    public func setFlowControl(pause: @escaping () -> Void, resume: @escaping () -> Void) {
        subscription.flowControl = FlowControl(home: subscription.home, pause: pause, resume: resume)
    }
}

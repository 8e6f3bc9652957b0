import Synchronization

/// The result of one write or shutdown, replayed to every subscriber of the signal `write(_:)` returned.
///
/// The write starts when `write(_:)` is called, not when the signal is
/// subscribed, so consecutive writes go out in call order whoever subscribes.
///
/// Thread rule: safe from any thread.
final class WriteOutcome: @unchecked Sendable {
    // `state` is protected by `lock` (inline: no allocation per outcome); subscribers are called after it is released.
    private enum State {
        case pending([Subscriber<Void>])
        case finished((any Error)?)
    }
    private let lock = SpinLock()
    @exclusivity(unchecked) private var state = State.pending([])

    /// A signal that completes when the write is flushed, or fails with its error.
    var signal: Signal<Void> {
        Signal { [self] subscriber in
            observe(subscriber)
            return nil
        }.debugNamed("+write")
    }

    private func observe(_ subscriber: Subscriber<Void>) {
        lock.lock()
        switch state {
        case .pending(var waiting):
            state = .pending([])  // so `waiting` is the array's only reference: the append below does not copy it
            waiting.append(subscriber)
            state = .pending(waiting)
            lock.unlock()
        case .finished(let error):
            lock.unlock()
            WriteOutcome.deliver(error, to: subscriber)
        }
    }

    /// Records the result and tells everyone waiting. Later calls do nothing.
    func finish(_ error: (any Error)?) {
        lock.lock()
        guard case .pending(let waiting) = state else {
            lock.unlock()
            return
        }
        state = .finished(error)
        lock.unlock()
        for subscriber in waiting { WriteOutcome.deliver(error, to: subscriber) }
    }

    private static func deliver(_ error: (any Error)?, to subscriber: Subscriber<Void>) {
        if let error {
            subscriber.sendError(error)
        } else {
            subscriber.sendCompleted()
        }
    }
}

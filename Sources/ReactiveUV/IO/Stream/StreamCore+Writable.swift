import Synchronization

/// The subscribers of one stream's `writable` signal, on its loop thread.
///
/// Thread rule: loop thread only (the stream's).
final class WritableWatchers {
    // Loop thread only.
    var subscribers: [(id: Int, subscriber: Subscriber<Bool>)] = []
    var nextID = 0
}

// `writable` (Node's 'drain'): true while the queue's cost is at or below the high-water mark,
// false from the write that passes it until it has drained to the low-water mark.
extension StreamConnection {
    /// Adds a `writable` subscriber: it gets the current state now, then each change; it completes when the stream ends.
    func watchWritable(_ subscriber: Subscriber<Bool>) -> (any Disposable)? {
        assertInEventLoop()
        guard isHandleOpen else {
            subscriber.sendCompleted()
            return nil
        }
        let watchers = writableWatchers ?? {
            let made = WritableWatchers()
            writableWatchers = made
            return made
        }()
        let id = watchers.nextID
        watchers.nextID += 1
        watchers.subscribers.append((id, subscriber))
        subscriber.sendNext(isWritable)
        let loop = self.loop
        // Strong capture: the stream outlives the watch only until its own end, which clears the list.
        return ActionDisposable { [self] in
            if loop.inEventLoop {
                unwatchWritable(id)
            } else {
                loop.execute { [self] in unwatchWritable(id) }
            }
        }
    }

    private func unwatchWritable(_ id: Int) {
        writableWatchers?.subscribers.removeAll { $0.id == id }
    }

    /// Records and announces a change of `isWritable`.
    func setWritable(_ writable: Bool) {
        extras.isWritable = writable
        guard let watchers = writableWatchers, !watchers.subscribers.isEmpty else { return }
        for (_, subscriber) in watchers.subscribers { subscriber.sendNext(writable) }
    }

    /// The stream ended: every `writable` subscriber completes.
    func endWritableWatchers() {
        guard let watchers = writableWatchers else { return }
        writableWatchers = nil
        for (_, subscriber) in watchers.subscribers { subscriber.sendCompleted() }
    }
}

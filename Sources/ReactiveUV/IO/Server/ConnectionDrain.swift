// A drain as each connection sees it: the `draining` signal (NIO's quiesce event, per connection),
// the handler's `markIdle()`, and the close of idle connections (Node's `closeIdleConnections()`).
extension StreamConnection {
    /// Sends once, then completes, when the server that accepted this connection begins to drain
    /// (see `TCPServer.DrainRequest`): the connection's own notice, as NIO's
    /// `ServerQuiescingHelper` sends each channel a quiesce event.
    ///
    /// A handler that hears it finishes the work in hand (the response it is writing), then
    /// closes the connection; under a drain that closes idle connections
    /// (`.graceful(timeout:closingIdle: true)`) calling `markIdle()` closes it. Subscribed
    /// during a drain, it sends at once. It completes with no value when the connection ends
    /// before any drain, or at once when subscribed after its end. On an open connection no
    /// server accepted (`TCP.connect`, a pipe) it sends nothing and does not complete, so
    /// `work.take(until: connection.draining)` runs as long as it would without it. Every
    /// connection of a server on a group hears it on its own loop.
    ///
    /// Order: on the connection's loop the value comes before the drain closes the connection
    /// for being idle (a subscriber homed on another loop hears it after a hop, possibly after
    /// that close).
    ///
    /// Thread rule: safe from any thread; the value arrives on the subscriber's home loop.
    public var draining: Signal<Void> {
        Signal { [self] subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "\(transport.connectionTypeName).draining") { _ in
                self.watchDrain(subscriber)
            }
        }.debugNamed("+draining(\(peerDescription))")
    }

    /// Says the connection has nothing in progress: the last request was answered and nothing
    /// of the next one has been read. A drain that closes idle connections
    /// (`DrainRequest.graceful(timeout:closingIdle: true)`) closes it at its start, or now
    /// when it is under way.
    ///
    /// Idle means: `markIdle()` was called (or the server accepted the connection) and since
    /// then no byte was read and no write queued (`send`, `write`, `sendFile`), and the kernel
    /// holds no byte from the peer that is not read yet (a request on its way). An HTTP/1.1
    /// keep-alive server calls it after queueing each response, unless its parser holds
    /// another request (one pipelined behind the last): the library cannot see that buffer.
    /// So a connection accepted and silent is idle; one whose handler never calls this is idle
    /// only until its first byte moves, as Node counts a socket without a request in flight.
    ///
    /// The close is `close()`'s: what was queued (the response just written) is sent, then
    /// FIN, so the peer reads every byte, then EOF. A client that sends its next request just
    /// as the close happens finds it reset, as with any keep-alive server; HTTP clients retry
    /// such requests. Outside a drain it only records the state; on a connection no server
    /// accepted it changes nothing.
    ///
    /// Thread rule: safe from any thread (called elsewhere, it takes effect on the connection's
    /// loop, in order with the sends made from the same thread).
    public final func markIdle() {
        if onLoopThread {
            becomeIdle()
        } else {
            // Refused only once the loop has shut down, which closed the connection.
            _ = loop.enqueue { [self] in becomeIdle() }
        }
    }

    // MARK: - On the loop thread

    /// `markIdle()` on the loop: clears `busy`, and closes the connection if a drain asks for idle ones.
    private func becomeIdle() {
        guard isHandleOpen else { return }
        bits.busy = false
        if bits.closesWhenIdle { closeIfIdle() }
    }

    /// Adds a `draining` subscriber; it is told now during a drain, or completes now when the connection ended.
    private func watchDrain(_ subscriber: Subscriber<Void>) -> (any Disposable)? {
        assertInEventLoop()
        guard isHandleOpen else {
            subscriber.sendCompleted()
            return nil
        }
        // No server accepted it: no drain can reach it.
        guard let accepted = owner as? AcceptedStreams else { return nil }
        return accepted.watchDrain(of: self, subscriber)
    }

    /// A drain that closes idle connections reached this one: closed now if idle, else once `markIdle()` finds it idle.
    func closeWhenIdleForDrain() {
        guard isHandleOpen else { return }
        bits.closesWhenIdle = true
        closeIfIdle()
    }

    /// Closes the connection gracefully when it is idle (see `markIdle()`).
    ///
    /// With nothing queued the socket closes now: the kernel sends what it holds, then FIN, as
    /// `uv_shutdown` would one loop turn later, and the connection leaves its server at once (a
    /// deadline passing meanwhile cannot reset it). Unread bytes would turn the close into a reset:
    /// they make the connection busy, never idle.
    private func closeIfIdle() {
        guard isHandleOpen, !bits.busy, !bits.closesWhenFlushed, io.unreadByteCount == 0 else { return }
        if !ipc, !bits.shutdownPending, fileSends?.isHolding != true, queuedWriteCost == 0, loopQueuedWriteByteCount == 0 {
            end(.closed)
        } else {
            closeWhenFlushed(outcome: nil)
        }
    }
}

extension AcceptedStreams {
    /// Adds a `draining` subscriber of `stream`: told now if a drain began, else when one does.
    func watchDrain(of stream: StreamConnection, _ subscriber: Subscriber<Void>) -> (any Disposable)? {
        if isDraining {
            subscriber.sendNext(())
            subscriber.sendCompleted()
            return nil
        }
        let id = nextDrainWatcherID
        nextDrainWatcherID += 1
        drainWatchers[ObjectIdentifier(stream), default: []].append((id, subscriber))
        let loop = stream.loop
        // The stream (not this listener's list, which is loop-bound) is captured: its owner is the list while it is open.
        return ActionDisposable {
            let unwatch: @Sendable () -> Void = { (stream.owner as? AcceptedStreams)?.unwatchDrain(of: stream, id: id) }
            if loop.inEventLoop { unwatch() } else { loop.execute(unwatch) }
        }
    }

    private func unwatchDrain(of stream: StreamConnection, id: Int) {
        let key = ObjectIdentifier(stream)
        drainWatchers[key]?.removeAll { $0.id == id }
        if drainWatchers[key]?.isEmpty == true { drainWatchers[key] = nil }
    }

    /// `stream` ended before any drain told it: its `draining` subscribers complete with no value.
    func endDrainWatchers(of stream: StreamConnection) {
        guard let watchers = drainWatchers.removeValue(forKey: ObjectIdentifier(stream)) else { return }
        for watcher in watchers { watcher.subscriber.sendCompleted() }
    }

    /// A drain began: every open connection's `draining` subscribers are told (once, at the first
    /// call); with `closingIdle` the idle connections close now and the others once they mark
    /// themselves idle (a later request closing idle ones calls it again).
    func beginDraining(closingIdle: Bool) {
        isDraining = true
        let watchers = drainWatchers
        drainWatchers = [:]
        // A copy: a subscriber or a close may end connections while this goes.
        for stream in open {
            if let told = watchers[ObjectIdentifier(stream)] {
                for watcher in told {
                    if stream.isHandleOpen { watcher.subscriber.sendNext(()) }
                    watcher.subscriber.sendCompleted()
                }
            }
            if closingIdle { stream.closeWhenIdleForDrain() }
        }
    }
}

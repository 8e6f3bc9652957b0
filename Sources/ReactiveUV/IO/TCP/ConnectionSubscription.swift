import Synchronization

/// A client subscription that owns the one connection it sends (`TCP.connect`, `UnixSocket.connect`,
/// `UnixSocket.open`): it completes when the connection closes, fails when its loop shuts down, and
/// disposing it closes the connection.
///
/// Thread rule: loop thread only (`dispose()` hops there), except `init`, `dispose()` and `isDisposed`.
class ConnectionSubscription<Connection: StreamConnection>: LoopDisposable, StreamConnectionOwner, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable `loop` and the atomic `disposedFlag`.
    let loop: EventLoop
    /// Who gets the connection; nil once the subscription ended.
    private var subscriber: Subscriber<Connection>?
    /// The connection once made (connecting, or sent); nil once it ended or was released.
    final var stream: Connection?
    /// Whether the connection was sent: from then on its end ends the subscription.
    private(set) final var sent = false
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, subscriber: Subscriber<Connection>) {
        self.loop = loop
        self.subscriber = subscriber
    }

    /// Whether the subscription has ended (or was disposed).
    final var hasEnded: Bool { subscriber == nil }

    /// Makes `stream` this subscription's: it is told when the stream ends.
    final func own(_ stream: Connection) {
        stream.owner = self
        self.stream = stream
    }

    /// Sends the connection: from now on its end ends the subscription.
    final func send(_ stream: Connection) {
        sent = true
        subscriber?.sendNext(stream)
    }

    final func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {
        guard stream === self.stream else { return }
        self.stream = nil
        if case .shutDown = reason {
            finish(EventLoopError.shutDown(loop: loop.name))
        } else if sent {
            finish(nil)
        }
        // Before it was sent, a closed stream was the subclass's to close: it decides what follows.
    }

    /// Ends the subscription: completes (nil) or fails, and releases everything.
    final func finish(_ error: (any Error)?) {
        let subscriber = self.subscriber
        self.subscriber = nil
        release()
        subscriber?.sendEnd(failure: error)
    }

    /// Releases what the subscription holds: the connection closes. A subclass releases its own, then calls this.
    func release() {
        let stream = self.stream
        self.stream = nil
        stream?.end(.closed)
    }

    final func abandon() {
        subscriber = nil
        release()
    }
}

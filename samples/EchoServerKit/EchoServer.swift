import ReactiveUV

/// What an echo server reports as clients come and go.
///
/// Thread rule: a value type; safe from any thread.
public enum EchoEvent: Sendable {
    /// The server is listening at this address.
    case listening(SocketAddress)
    /// The server is listening on this Unix socket path (`run(unixPath:)`).
    case listeningOnPath(String)
    /// A client connected; `open` counts the clients connected now (a Unix socket's client has no address: nil).
    case connected(peer: SocketAddress?, open: Int)
    /// A client went away after `bytes` bytes were echoed; `error` says why if it was not a clean close.
    case disconnected(peer: SocketAddress?, bytes: Int, error: (any Error)?, open: Int)
    /// A client was turned away at once because `options.maxConnections` clients were connected.
    case refused(peer: SocketAddress?, open: Int)
}

/// The echo sample's server: every byte a client sends is sent back to it.
///
/// Thread rule: safe from any thread.
public enum EchoServer {
    /// Listens on `host:port` and echoes every connection, reporting clients as they come and go.
    ///
    /// Each client is served until it half-closes (its echo is flushed, then
    /// the connection closes), resets, or the subscription is disposed, which
    /// closes every connection. Reading pauses while a client does not read
    /// its echo (see `TCPBufferLimits`), so a client that only sends cannot
    /// grow the server's memory. With `options.maxConnections`, clients beyond
    /// the limit are reset at once and reported as `.refused`. A bind error ends
    /// the signal.
    ///
    /// - Parameters:
    ///   - host: The address to listen on.
    ///   - port: The port; 0 picks a free one (reported by `.listening`).
    ///   - options: Socket options and buffer limits for each client.
    ///   - loop: The loop to serve on; nil for the subscription's home loop.
    /// - Returns: A signal of server events; it never completes on its own.
    ///
    /// Thread rule: safe from any thread.
    public static func run(
        host: String = "127.0.0.1",
        port: Int,
        options: TCPOptions = TCPOptions(),
        on loop: EventLoop? = nil
    ) -> Signal<EchoEvent> {
        Signal { subscriber in
            let sessions = EchoSessions(report: { subscriber.sendNext($0) })
            let server = TCPServer.serve(host: host, port: port, options: options, on: loop).subscribe(
                next: { event in
                    switch event {
                    case .listening(let address): subscriber.sendNext(.listening(address))
                    case .accepted(let connection): sessions.serve(connection, peer: connection.peerAddress)
                    case .refused(let peer, let open): subscriber.sendNext(.refused(peer: peer, open: open))
                    }
                },
                error: { subscriber.sendError($0) })
            return ActionDisposable {
                server.dispose()
                sessions.disposeAll()
            }
        }
    }

    /// Like `run(host:port:options:on:)`, on a Unix-domain socket at `unixPath` (removed when the subscription is disposed).
    ///
    /// - Parameters:
    ///   - unixPath: The socket file's path (or `"\0name"` for a Linux abstract name).
    ///   - options: Buffer limits, the connection limit, stale-file removal and permissions.
    ///   - loop: The loop to serve on; nil for the subscription's home loop.
    /// - Returns: A signal of server events (`.listeningOnPath` first); it never completes on its own.
    ///
    /// Thread rule: safe from any thread.
    public static func run(
        unixPath: String,
        options: UnixSocketOptions = UnixSocketOptions(),
        on loop: EventLoop? = nil
    ) -> Signal<EchoEvent> {
        Signal { subscriber in
            let sessions = EchoSessions(report: { subscriber.sendNext($0) })
            let server = UnixSocket.serve(path: unixPath, options: options, on: loop).subscribe(
                next: { event in
                    switch event {
                    case .listening(let path): subscriber.sendNext(.listeningOnPath(path))
                    case .accepted(let connection): sessions.serve(connection, peer: nil)
                    case .refused(let open): subscriber.sendNext(.refused(peer: nil, open: open))
                    }
                },
                error: { subscriber.sendError($0) })
            return ActionDisposable {
                server.dispose()
                sessions.disposeAll()
            }
        }
    }
}

/// The clients of one echo server subscription.
///
/// Everything runs on the subscription's home loop thread (the server's events
/// and every connection's bytes are delivered there), so nothing is locked.
/// The callbacks of several subscriptions share it, so it is Sendable: by
/// that confinement, not by a lock.
private final class EchoSessions: @unchecked Sendable {
    // Home loop thread only: created in `didSubscribe`, used by callbacks and teardown that run there.
    private let report: @Sendable (EchoEvent) -> Void
    private var reading: [ObjectIdentifier: any Disposable] = [:]

    init(report: @escaping @Sendable (EchoEvent) -> Void) { self.report = report }

    /// Echoes one client: a TCP or a Unix-socket connection alike (the stream core is the same).
    func serve(_ connection: StreamConnection, peer: SocketAddress?) {
        let key = ObjectIdentifier(connection)
        let client = EchoClient()
        reading[key] = CompoundDisposable()  // a placeholder: `bytes` may end before subscribe returns
        report(.connected(peer: peer, open: reading.count))
        let finish: @Sendable ((any Error)?) -> Void = { [weak self] error in
            guard let self, !client.finished else { return }
            client.finished = true
            reading[key] = nil
            report(.disconnected(peer: peer, bytes: client.echoed, error: error, open: reading.count))
        }
        let subscription = connection.bytes.subscribe(
            next: { chunk in
                client.echoed += chunk.count
                connection.send(chunk)
            },
            error: { error in
                connection.close()
                finish(error)
            },
            completed: {
                // The client half-closed: flush what is still queued for it, then close.
                connection.shutdown().subscribe(error: { _ in connection.close() }, completed: { connection.close() })
                finish(nil)
            })
        if !client.finished { reading[key] = subscription }
    }

    func disposeAll() {
        let all = reading.values
        reading.removeAll()
        for subscription in all { subscription.dispose() }
    }
}

/// One client's count, shared by its subscription's callbacks.
private final class EchoClient: @unchecked Sendable {
    // Home loop thread only, like `EchoSessions`.
    var echoed = 0
    var finished = false
}

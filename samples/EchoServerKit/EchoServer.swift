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
    /// The count is taken on the loop that serves the client: on a group, two loops' events may reach the
    /// subscriber in either order, so a subscriber that needs a running count keeps its own (the echo sample does).
    case connected(peer: SocketAddress?, open: Int)
    /// A client is served on the loop named `loop` (a server on a group only; sent just before `.connected`).
    case served(peer: SocketAddress?, loop: String)
    /// A client went away after `bytes` bytes were echoed; `error` says why if it was not a clean close.
    case disconnected(peer: SocketAddress?, bytes: Int, error: (any Error)?, open: Int)
    /// A client was turned away at once because `options.maxConnections` clients were connected.
    case refused(peer: SocketAddress?, open: Int)
    /// A drain began: no new client is accepted; the `open` clients are still echoed until they leave (or the deadline).
    /// With a drain that closes idle connections, the idle ones (everything they sent was echoed) are closed at once.
    case draining(open: Int)
    /// A TLS client failed its handshake (`tls` given to `run`) and was closed; the error names it.
    case handshakeFailed(TLSError)
}

/// The echo sample's server: every byte a client sends is sent back to it.
///
/// Thread rule: safe from any thread.
public enum EchoServer {
    /// Listens on `host:port` and echoes every connection, reporting clients as they come and go.
    ///
    /// Each client is served until it half-closes (its echo is flushed, then
    /// the connection closes), resets, or the subscription is disposed, which
    /// closes every connection. A client counts as idle (`StreamConnection.markIdle()`)
    /// whenever everything it sent has been echoed and nothing more waits unread: a drain
    /// asked with `closingIdle` closes it then, after its echo. Reading pauses while a client does not read
    /// its echo (see `TCPBufferLimits`), so a client that only sends cannot
    /// grow the server's memory. With `options.maxConnections`, clients beyond
    /// the limit are reset at once and reported as `.refused`. A bind error ends
    /// the signal.
    ///
    /// - Parameters:
    ///   - host: The address to listen on.
    ///   - port: The port; 0 picks a free one (reported by `.listening`).
    ///   - backlog: The queue of clients not yet accepted; nil for the system's maximum (`net.core.somaxconn`).
    ///   - options: Socket options and buffer limits for each client.
    ///   - loop: The loop to serve on; nil for the subscription's home loop.
    ///   - drain: Requests to drain (see `TCPServer.DrainRequest`): `.draining` is sent, and the
    ///     signal completes once every client has left (or was reset at the deadline).
    /// - Returns: A signal of server events; it completes only after a drain.
    ///
    /// Thread rule: safe from any thread.
    public static func run(
        host: String = "127.0.0.1",
        port: Int,
        backlog: Int32? = nil,
        options: TCPOptions = TCPOptions(),
        on loop: EventLoop? = nil,
        drain: Signal<TCPServer.DrainRequest>? = nil
    ) -> Signal<EchoEvent> {
        serving { sessions, _ in
            TCPServer.serve(host: host, port: port, backlog: backlog, options: options, on: loop, drain: drain)
                .map { event in echoEvent(event, serving: sessions) }
        }
    }

    /// Like `run(host:port:backlog:options:on:drain:)`, on every loop of `group`: each client is echoed on the
    /// loop that accepted it (see `TCPServer.serve(host:port:backlog:options:on:onAccepted:drain:)`),
    /// so the server uses every loop's core.
    ///
    /// The events reach the subscriber on its home loop; `.served` names each client's loop
    /// before its `.connected`, and `open` counts the clients of every loop.
    ///
    /// - Parameters:
    ///   - host: The address to listen on.
    ///   - port: The port; 0 picks a free one (reported by `.listening`).
    ///   - backlog: The queue of clients not yet accepted; nil for the system's maximum (`net.core.somaxconn`).
    ///   - options: Socket options and buffer limits for each client; `maxConnections` counts across the group.
    ///   - group: The loops that serve the clients.
    ///   - drain: Requests to drain every loop (see `TCPServer.DrainRequest`): `.draining` is sent,
    ///     and the signal completes once every client has left (or was reset at the deadline).
    ///   - tls: Serve TLS with this configuration (each client is served after its handshake; a
    ///     failed one is reported as `.handshakeFailed`); nil for plain TCP.
    /// - Returns: A signal of server events; it completes only after a drain.
    ///
    /// Thread rule: safe from any thread.
    public static func run(
        host: String = "127.0.0.1",
        port: Int,
        backlog: Int32? = nil,
        options: TCPOptions = TCPOptions(),
        on group: EventLoopGroup,
        drain: Signal<TCPServer.DrainRequest>? = nil,
        tls: TLSServerConfiguration? = nil
    ) -> Signal<EchoEvent> {
        serving { sessions, report in
            let serveHere: @Sendable (TCPConnection) -> Void = { connection in
                // On the connection's loop: its bytes are subscribed (and echoed) there.
                report(.served(peer: connection.peerAddress, loop: connection.loop.name))
                sessions.serve(connection, peer: connection.peerAddress)
            }
            // `.accepted` is served in `onAccepted`, on its own loop.
            let server = tls.map {
                TCPServer.serve(host: host, port: port, backlog: backlog, options: options, tls: $0, on: group, onAccepted: serveHere,
                                drain: drain, onHandshakeFailure: { report(.handshakeFailed($0)) })
            } ?? TCPServer.serve(host: host, port: port, backlog: backlog, options: options, on: group, onAccepted: serveHere, drain: drain)
            return server.map { event in echoEvent(event, serving: nil) }
        }
    }

    /// Like `run(host:port:backlog:options:on:drain:)`, on a Unix-domain socket at `unixPath` (removed when the subscription is disposed).
    ///
    /// - Parameters:
    ///   - unixPath: The socket file's path (or `"\0name"` for a Linux abstract name).
    ///   - backlog: The queue of clients not yet accepted; nil for the system's maximum (`net.core.somaxconn`).
    ///   - options: Buffer limits, the connection limit, stale-file removal and permissions.
    ///   - loop: The loop to serve on; nil for the subscription's home loop.
    ///   - drain: Requests to drain (see `UnixSocket.DrainRequest`): `.draining` is sent, and the
    ///     signal completes once every client has left (or was closed at the deadline).
    /// - Returns: A signal of server events (`.listeningOnPath` first); it completes only after a drain.
    ///
    /// Thread rule: safe from any thread.
    public static func run(
        unixPath: String,
        backlog: Int32? = nil,
        options: UnixSocketOptions = UnixSocketOptions(),
        on loop: EventLoop? = nil,
        drain: Signal<UnixSocket.DrainRequest>? = nil
    ) -> Signal<EchoEvent> {
        serving { sessions, _ in
            UnixSocket.serve(path: unixPath, backlog: backlog, options: options, on: loop, drain: drain)
                .map { event in echoEvent(event, serving: sessions) }
        }
    }

    /// Like `run(unixPath:backlog:options:on:drain:)`, on every loop of `group`: the first loop accepts
    /// and each client is echoed on the loop it was handed to, in turn (see
    /// `UnixSocket.serve(path:backlog:options:on:onAccepted:drain:)`).
    ///
    /// The events reach the subscriber on its home loop; `.served` names each client's loop
    /// before its `.connected`, and `open` counts the clients of every loop.
    ///
    /// - Parameters:
    ///   - unixPath: The socket file's path (or `"\0name"` for a Linux abstract name).
    ///   - backlog: The queue of clients not yet accepted; nil for the system's maximum (`net.core.somaxconn`).
    ///   - options: Buffer limits, the connection limit (across the group), stale-file removal and permissions.
    ///   - group: The loops that serve the clients.
    ///   - drain: Requests to drain every loop (see `UnixSocket.DrainRequest`): `.draining` is sent,
    ///     and the signal completes once every client has left (or was closed at the deadline).
    ///   - tls: Serve TLS with this configuration (a failed handshake is reported as `.handshakeFailed`); nil for plain.
    /// - Returns: A signal of server events (`.listeningOnPath` first); it completes only after a drain.
    ///
    /// Thread rule: safe from any thread.
    public static func run(
        unixPath: String,
        backlog: Int32? = nil,
        options: UnixSocketOptions = UnixSocketOptions(),
        on group: EventLoopGroup,
        drain: Signal<UnixSocket.DrainRequest>? = nil,
        tls: TLSServerConfiguration? = nil
    ) -> Signal<EchoEvent> {
        serving { sessions, report in
            let serveHere: @Sendable (UnixConnection) -> Void = { connection in
                // On the connection's loop: its bytes are subscribed (and echoed) there.
                report(.served(peer: nil, loop: connection.loop.name))
                sessions.serve(connection, peer: nil)
            }
            // `.accepted` is served in `onAccepted`, on its own loop.
            let server = tls.map {
                UnixSocket.serve(path: unixPath, backlog: backlog, options: options, tls: $0, on: group, onAccepted: serveHere,
                                 drain: drain, onHandshakeFailure: { report(.handshakeFailed($0)) })
            } ?? UnixSocket.serve(path: unixPath, backlog: backlog, options: options, on: group, onAccepted: serveHere, drain: drain)
            return server.map { event in echoEvent(event, serving: nil) }
        }
    }

    /// What every `run` shares: the clients' sessions, reporting through the subscriber, and at
    /// teardown the server disposed, then every client's connection. `server` makes the server's
    /// signal (given the sessions and the report), mapped to echo events (nil: nothing to report).
    private static func serving(
        _ server: @escaping @Sendable (EchoSessions, @escaping @Sendable (EchoEvent) -> Void) -> Signal<EchoEvent?>
    ) -> Signal<EchoEvent> {
        Signal { subscriber in
            let report: @Sendable (EchoEvent) -> Void = { subscriber.sendNext($0) }
            let sessions = EchoSessions(report: report)
            let events = server(sessions, report).subscribe(
                next: { event in if let event { report(event) } },
                error: { subscriber.sendError($0) },
                completed: { subscriber.sendCompleted() })
            return ActionDisposable {
                events.dispose()
                sessions.disposeAll()
            }
        }
    }

    /// A TCP server's event as an echo event; an accepted client is served by `sessions` (nil: by `onAccepted`).
    private static func echoEvent(_ event: TCPServer.Event, serving sessions: EchoSessions?) -> EchoEvent? {
        switch event {
        case .listening(let address): return .listening(address)
        case .accepted(let connection):
            sessions?.serve(connection, peer: connection.peerAddress)
            return nil
        case .refused(let peer, let open): return .refused(peer: peer, open: open)
        case .draining(let open): return .draining(open: open)
        }
    }

    /// A Unix-socket server's event as an echo event; an accepted client is served by `sessions` (nil: by `onAccepted`).
    private static func echoEvent(_ event: UnixSocket.Event, serving sessions: EchoSessions?) -> EchoEvent? {
        switch event {
        case .listening(let path): return .listeningOnPath(path)
        case .accepted(let connection):
            sessions?.serve(connection, peer: nil)
            return nil
        case .refused(let open): return .refused(peer: nil, open: open)
        case .draining(let open): return .draining(open: open)
        }
    }
}

/// The clients of one echo server subscription.
///
/// Each client is served on its connection's loop: the subscription's home for a server
/// on one loop, the loop that accepted it for a server on a group, so several loops may
/// add and remove clients at once: the table of clients is behind a pthread mutex (taken once per
/// connect and disconnect, never per chunk).
private final class EchoSessions: Sendable {
    private let report: @Sendable (EchoEvent) -> Void
    private let reading = PthreadLocked<[ObjectIdentifier: any Disposable]>([:])

    init(report: @escaping @Sendable (EchoEvent) -> Void) { self.report = report }

    /// Echoes one client: a TCP or a Unix-socket connection alike (the stream core is the same).
    func serve(_ connection: StreamConnection, peer: SocketAddress?) {
        let key = ObjectIdentifier(connection)
        let client = EchoClient()
        // A placeholder: `bytes` may end before subscribe returns.
        let open = reading.withLock { reading in
            reading[key] = CompoundDisposable()
            return reading.count
        }
        report(.connected(peer: peer, open: open))
        let finish: @Sendable ((any Error)?) -> Void = { [weak self] error in
            guard let self, !client.finished else { return }
            client.finished = true
            let open = reading.withLock { reading in
                reading[key] = nil
                return reading.count
            }
            report(.disconnected(peer: peer, bytes: client.echoed, error: error, open: open))
        }
        let subscription = connection.bytes.subscribe(
            next: { chunk in
                client.echoed += chunk.count
                connection.send(chunk)
                // Everything read is echoed (queued): a drain closing idle clients may close this one
                // now, after the echo. Echo has no message boundary, so that is the only one there is.
                connection.markIdle()
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
        if !client.finished {
            let kept = reading.withLock { reading in
                // Gone when `disposeAll` ran meanwhile (another thread's dispose, for a group).
                guard reading[key] != nil else { return false }
                reading[key] = subscription
                return true
            }
            if !kept { subscription.dispose() }
        }
    }

    func disposeAll() {
        let all = reading.withLock { reading in
            defer { reading.removeAll() }
            return Array(reading.values)
        }
        for subscription in all { subscription.dispose() }
    }
}

/// One client's count, shared by its subscription's callbacks.
private final class EchoClient: @unchecked Sendable {
    // The connection's loop thread only: `serve` and the `bytes` callbacks run there.
    var echoed = 0
    var finished = false
}

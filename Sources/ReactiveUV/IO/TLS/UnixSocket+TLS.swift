// TLS over Unix-domain sockets: the same handshakes as over TCP. A path names no host, so a
// client checks the certificate against `serverName` (or only the chain, with `verifiesHostname` off).

extension UnixSocket {
    /// Connects to the server on `path`, runs the TLS handshake, and sends the connection once it finished.
    ///
    /// `TCP.connect(host:port:tls:...)`'s rules over a Unix socket. The server's certificate is
    /// checked against `tls.serverName` (also sent as SNI): without one, the signal fails with
    /// `TLSError.configuration` unless `verifiesHostname` is off.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - tls: What to trust and offer; `serverName` names the server.
    ///   - options: Buffer limits for the connection.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of one connection, sent after the handshake; it completes when the connection closes.
    ///
    /// Thread rule: safe from any thread.
    public static func connect(path: String, tls: TLSClientConfiguration, options: UnixSocketOptions = UnixSocketOptions(),
                               on loop: EventLoop? = nil) -> Signal<UnixConnection> {
        guard tls.serverName != nil || !tls.verifiesHostname else {
            let error = TLSError(.configuration, message: "a TLS client over a Unix socket checks the name in `serverName`: set it, or turn `verifiesHostname` off",
                                 peer: UnixSocketPath.display(path))
            return Signal { subscriber in
                subscriber.sendError(error)
                return nil
            }
        }
        return TLSHandshakes.client(connect(path: path, options: options, on: loop), tls: tls, serverName: tls.serverName,
                                    server: "\(tls.serverName ?? "")@\(path)")
            .debugNamed("+UnixSocket.connect(\(UnixSocketPath.display(path)), tls)")
    }

    /// Connects with TLS, runs `body` with the open connection, then closes it (close_notify, then
    /// FIN): `withConnection(path:...)`'s rules with `connect(path:tls:...)`'s errors.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - tls: What to trust and offer; `serverName` names the server.
    ///   - options: Buffer limits for the connection.
    ///   - loop: Where the socket lives; nil for the calling task's loop.
    ///   - isolation: The caller's isolation, where `body` runs (leave the default).
    ///   - body: Runs with the open connection, in the caller's isolation.
    /// - Returns: What `body` returned.
    ///
    /// Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withConnection<Result>(
        path: String, tls: TLSClientConfiguration, options: UnixSocketOptions = UnixSocketOptions(), on loop: EventLoop? = nil,
        isolation: isolated (any Actor)? = #isolation, _ body: (UnixConnection) async throws -> Result
    ) async throws -> Result {
        try await withScopedConnection(connect(path: path, tls: tls, options: options, on: loop), isolation: isolation, body)
    }

    /// Listens on `path` and sends each connection whose TLS handshake finished: `TCPServer.listen(...tls:...)`'s rules.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Buffer limits, the connection limit, stale-file removal and the file's permissions.
    ///   - tls: The certificate, key and client-certificate policy.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of connections, each after its handshake.
    ///
    /// Thread rule: safe from any thread; `onHandshakeFailure` runs on the connection's loop thread.
    public static func listen(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                              tls: TLSServerConfiguration, on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil,
                              onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<UnixConnection> {
        serve(path: path, backlog: backlog, options: options, tls: tls, on: loop, drain: drain,
              onHandshakeFailure: onHandshakeFailure).compactMap { $0.acceptedConnection }
    }

    /// Like `listen(path:backlog:options:tls:on:drain:onHandshakeFailure:)`, with the server's
    /// other events: `.accepted` comes for each connection once its handshake finished.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Buffer limits, the connection limit, stale-file removal and the file's permissions.
    ///   - tls: The certificate, key and client-certificate policy.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread; `onHandshakeFailure` runs on the connection's loop thread.
    public static func serve(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                             tls: TLSServerConfiguration, on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil,
                             onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<Event> {
        TLSHandshakes.server(serve(path: path, backlog: backlog, options: options, on: loop, drain: drain), tls: tls,
                             onHandshakeFailure: onHandshakeFailure).debugNamed("+UnixSocket.serve(\(UnixSocketPath.display(path)), tls)")
    }

    /// Serves `path` with TLS on every loop of `group`: `serve(path:backlog:options:on:onAccepted:drain:)`'s
    /// rules, each connection's handshake run on the loop it was handed to. `onAccepted` runs there
    /// once the handshake finished, before `.accepted` is sent; a client that fails it is closed and
    /// never sent, and `onHandshakeFailure` hears why.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Buffer limits, the connection limit (across the group), stale-file removal and permissions.
    ///   - tls: The certificate, key and client-certificate policy.
    ///   - group: The loops that home the connections; every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread after its handshake, before `.accepted` is sent.
    ///   - drain: Requests to quiesce every loop's share (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread; the callbacks run on the connection's loop thread.
    public static func serve(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                             tls: TLSServerConfiguration, on group: EventLoopGroup,
                             onAccepted: (@Sendable (UnixConnection) -> Void)? = nil, drain: Signal<DrainRequest>? = nil,
                             onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<Event> {
        TLSHandshakes.groupServer(tls: tls, onAccepted: onAccepted, onHandshakeFailure: onHandshakeFailure) { handshake in
            serve(path: path, backlog: backlog, options: options, on: group, onAccepted: handshake, drain: drain)
        }.debugNamed("+UnixSocket.serve(\(UnixSocketPath.display(path)), tls, on: group)")
    }

    /// Listens on `path` with TLS for every loop of `group` and sends each connection whose
    /// handshake finished: `serve(path:backlog:options:tls:on:onAccepted:drain:onHandshakeFailure:)`
    /// without the other events. A connection arrives on its own loop's thread, after `onAccepted` ran there.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Buffer limits, the connection limit (across the group), stale-file removal and permissions.
    ///   - tls: The certificates, key and client-certificate policy.
    ///   - group: The loops that home the connections; the first one accepts. Every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread after its handshake, before it is sent.
    ///   - drain: Requests to quiesce (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of connections, each after its handshake.
    ///
    /// Thread rule: safe from any thread; the callbacks run on the connection's loop thread.
    public static func listen(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                              tls: TLSServerConfiguration, on group: EventLoopGroup,
                              onAccepted: (@Sendable (UnixConnection) -> Void)? = nil, drain: Signal<DrainRequest>? = nil,
                              onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<UnixConnection> {
        serve(path: path, backlog: backlog, options: options, tls: tls, on: group, onAccepted: onAccepted, drain: drain,
              onHandshakeFailure: onHandshakeFailure).compactMap { $0.acceptedConnection }
    }
}

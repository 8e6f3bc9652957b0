// TLS over TCP: the plain client and server signals, each connection handed on only once its
// handshake has finished on its loop. A TLS connection is a `TCPConnection` like any other.

extension TCP {
    /// Connects to `host:port`, runs the TLS handshake, and sends the connection once it finished.
    ///
    /// The connection is a `TCPConnection` like a plain one (`bytes`, `send`, `write`, `close`,
    /// flow control, half-close, the framing operators), in the TLS lane: what it reads is the
    /// plaintext of the peer's records, what it writes is sealed into records, and `close()` sends
    /// close_notify before FIN. `connection.tls` says what the handshake agreed on.
    ///
    /// The server's certificate is checked against `tls.trustRoots` and, unless
    /// `verifiesHostname` is off, against `tls.serverName ?? host` (also sent as SNI when it is not
    /// an IP address). The signal fails with the plain `connect`'s errors, or with a `TLSError`
    /// naming the peer: `.unknownCA`, `.certificateExpired`, `.hostnameMismatch`,
    /// `.noSharedProtocol`, `.handshakeTimeout`, `.peerAlert`, `.badRecord`, `.handshakeTruncated`.
    /// Ownership is the plain `connect`'s: disposing closes the connection, and the signal
    /// completes when it closes.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name.
    ///   - port: 1...65535.
    ///   - tls: What to trust and offer.
    ///   - options: Socket options and buffer limits for the connection.
    ///   - timeout: Give up connecting (before the handshake) after this long; nil leaves it to the system.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of one connection, sent after the handshake; it completes when the connection closes.
    ///
    /// Thread rule: safe from any thread.
    public static func connect(host: String, port: Int, tls: TLSClientConfiguration, options: TCPOptions = TCPOptions(),
                               timeout: Duration? = nil, on loop: EventLoop? = nil) -> Signal<TCPConnection> {
        TLSHandshakes.client(connect(host: host, port: port, options: options, timeout: timeout, on: loop), tls: tls,
                             serverName: tls.serverName ?? host, server: "\(tls.serverName ?? host)@\(host):\(port)").debugNamed("+TCP.connect(\(host):\(port), tls)")
    }

    /// Connects with TLS, runs `body` with the open connection, then closes it (close_notify,
    /// then FIN), and returns what `body` returned: `withConnection(host:port:...)`'s rules, with
    /// `connect(host:port:tls:...)`'s errors.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name.
    ///   - port: 1...65535.
    ///   - tls: What to trust and offer.
    ///   - options: Socket options and buffer limits for the connection.
    ///   - timeout: Give up connecting after this long; nil leaves it to the system.
    ///   - loop: Where the socket lives; nil for the calling task's loop.
    ///   - isolation: The caller's isolation, where `body` runs (leave the default).
    ///   - body: Runs with the open connection, in the caller's isolation.
    /// - Returns: What `body` returned.
    ///
    /// Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withConnection<Result>(
        host: String, port: Int, tls: TLSClientConfiguration, options: TCPOptions = TCPOptions(), timeout: Duration? = nil,
        on loop: EventLoop? = nil, isolation: isolated (any Actor)? = #isolation, _ body: (TCPConnection) async throws -> Result
    ) async throws -> Result {
        try await withScopedConnection(connect(host: host, port: port, tls: tls, options: options, timeout: timeout, on: loop),
                                       isolation: isolation, body)
    }
}

extension TCPServer {
    /// Listens on `host:port` and sends each connection whose TLS handshake finished.
    ///
    /// `listen(host:port:backlog:options:on:drain:)` with a TLS server in front of each
    /// connection: the handshake runs on the connection's loop as soon as it is accepted, and a
    /// client that fails it (plain bytes, an old TLS version, no certificate when one is
    /// required, no answer within `tls.handshakeTimeout`) is closed and never sent; `onHandshakeFailure`
    /// hears why, with the client's address.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port (use `serve` to learn which).
    ///   - backlog: The kernel's queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Socket options and buffer limits for each accepted connection.
    ///   - tls: The certificate, key and client-certificate policy.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of connections, each after its handshake.
    ///
    /// Thread rule: safe from any thread; `onHandshakeFailure` runs on the connection's loop thread.
    public static func listen(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                              tls: TLSServerConfiguration, on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil,
                              onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<TCPConnection> {
        serve(host: host, port: port, backlog: backlog, options: options, tls: tls, on: loop, drain: drain,
              onHandshakeFailure: onHandshakeFailure).compactMap { $0.acceptedConnection }
    }

    /// Like `listen(host:port:backlog:options:tls:on:drain:onHandshakeFailure:)`, but first sends
    /// `.listening(address)`; `.accepted` comes for each connection once its handshake finished.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port, reported by `.listening`.
    ///   - backlog: The kernel's queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Socket options and buffer limits for each accepted connection.
    ///   - tls: The certificate, key and client-certificate policy.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread; `onHandshakeFailure` runs on the connection's loop thread.
    public static func serve(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                             tls: TLSServerConfiguration, on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil,
                             onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<Event> {
        TLSHandshakes.server(serve(host: host, port: port, backlog: backlog, options: options, on: loop, drain: drain), tls: tls,
                             onHandshakeFailure: onHandshakeFailure).debugNamed("+TCPServer.serve(\(host):\(port), tls)")
    }

    /// Serves `host:port` with TLS on every loop of `group`: `serve(host:port:backlog:options:on:onAccepted:drain:)`'s
    /// rules, each connection's handshake run on the loop that accepted it. `onAccepted` runs there
    /// once the handshake finished, before `.accepted` is sent; a client that fails it is closed and
    /// never sent, and `onHandshakeFailure` hears why.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port, reported by `.listening`.
    ///   - backlog: Each loop's kernel queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Socket options and buffer limits for each accepted connection; `maxConnections` counts across the group.
    ///   - tls: The certificate, key and client-certificate policy.
    ///   - group: The loops that accept and home the connections; every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread after its handshake, before `.accepted` is sent.
    ///   - drain: Requests to quiesce every loop's share (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread; the callbacks run on the connection's loop thread.
    public static func serve(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                             tls: TLSServerConfiguration, on group: EventLoopGroup,
                             onAccepted: (@Sendable (TCPConnection) -> Void)? = nil, drain: Signal<DrainRequest>? = nil,
                             onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<Event> {
        TLSHandshakes.groupServer(tls: tls, onAccepted: onAccepted, onHandshakeFailure: onHandshakeFailure) { handshake in
            serve(host: host, port: port, backlog: backlog, options: options, on: group, onAccepted: handshake, drain: drain)
        }.debugNamed("+TCPServer.serve(\(host):\(port), tls, on: group)")
    }

    /// Listens on `host:port` with TLS on every loop of `group` and sends each connection whose
    /// handshake finished: `serve(host:port:backlog:options:tls:on:onAccepted:drain:onHandshakeFailure:)`
    /// without the other events. A connection arrives on its own loop's thread, after `onAccepted` ran there.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port (use `serve` to learn which).
    ///   - backlog: Each loop's kernel queue of connections not yet accepted (nil: the system's maximum).
    ///   - options: Socket options and buffer limits for each accepted connection; `maxConnections` counts across the group.
    ///   - tls: The certificates, key and client-certificate policy.
    ///   - group: The loops that accept and home the connections; every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread after its handshake, before it is sent.
    ///   - drain: Requests to quiesce every loop's share (see `DrainRequest`).
    ///   - onHandshakeFailure: Called on the connection's loop thread with each failed handshake's error.
    /// - Returns: A signal of connections, each after its handshake.
    ///
    /// Thread rule: safe from any thread; the callbacks run on the connection's loop thread.
    public static func listen(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                              tls: TLSServerConfiguration, on group: EventLoopGroup,
                              onAccepted: (@Sendable (TCPConnection) -> Void)? = nil, drain: Signal<DrainRequest>? = nil,
                              onHandshakeFailure: (@Sendable (TLSError) -> Void)? = nil) -> Signal<TCPConnection> {
        serve(host: host, port: port, backlog: backlog, options: options, tls: tls, on: group, onAccepted: onAccepted, drain: drain,
              onHandshakeFailure: onHandshakeFailure).compactMap { $0.acceptedConnection }
    }
}

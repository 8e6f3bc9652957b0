/// TCP servers: a listening socket as a signal of accepted connections.
///
/// Thread rule: safe from any thread.
public enum TCPServer {
    /// What a server signal from `serve` sends.
    ///
    /// Thread rule: safe from any thread.
    public enum Event: Sendable {
        /// The socket is bound and listening at this address (the real port when 0 was asked for). Sent once, first.
        case listening(SocketAddress)
        /// A client connected.
        case accepted(TCPConnection)
        /// A client was turned away (reset at once) because `options.maxConnections` were open.
        case refused(peer: SocketAddress?, open: Int)
        /// A drain began (see `DrainRequest`): the server accepts no more clients, and waits
        /// for these `open` connections to close. Sent once; each connection hears it too
        /// (`StreamConnection.draining`): finish its current work and `close()` it (or
        /// `markIdle()` it, when the drain closes idle connections). When the last one has
        /// closed (or the drain's deadline reset the rest) the signal completes.
        case draining(open: Int)
    }

    /// What a server's `drain` signal asks: to quiesce gracefully, or to stop now.
    ///
    /// The server follows its drain signal from the moment it is subscribed:
    /// - `.graceful(timeout:closingIdle:)` (the first one counts): the listening sockets close
    ///   at once, on every loop of a group (a client connecting from then on is refused with
    ///   `ECONNREFUSED`; one queued in the kernel and not yet accepted is reset), `serve` sends
    ///   `.draining(open:)`, and each connection already accepted hears it on its own loop
    ///   (`StreamConnection.draining`). With `closingIdle` (NIO's quiesce of an HTTP server,
    ///   Node's `closeIdleConnections()`), the idle connections (see
    ///   `StreamConnection.markIdle()`) close at once, gracefully: the peer reads what was
    ///   queued, then EOF; each other one closes as soon as its handler marks it idle, so a
    ///   request in flight finishes first. Without it, the connections carry on untouched. When
    ///   the last one has closed the server signal completes; at `timeout` the ones still open
    ///   (and only those) are reset (their `bytes` complete; RST to the peer) and the signal
    ///   completes. A later graceful request is ignored, except that one with `closingIdle`
    ///   closes the idle connections then (its timeout is ignored: the first deadline holds).
    /// - `.force`: the same, resetting the open connections now (also during a graceful drain:
    ///   the second Ctrl-C).
    ///
    /// A connection keeps its own lifetime during a drain: it closes when the application
    /// closes it, the peer resets it, or the deadline comes. The drain signal ending (or
    /// failing) changes nothing. Disposing the server during a drain closes everything at
    /// once, as it always does, and the signal does not complete.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum DrainRequest: Sendable, Hashable {
        /// Stop accepting, tell the application and each connection, close the idle connections when
        /// `closingIdle` is set, wait up to `timeout` for the others to close, then reset the rest.
        /// A zero or negative `timeout` waits for nothing: the same as `.force`.
        case graceful(timeout: Duration, closingIdle: Bool = false)
        /// Stop accepting and reset every open connection now.
        case force
    }

    /// Listens on `host:port` and sends each accepted connection.
    ///
    /// The socket is opened when a subscriber arrives, on the subscription's
    /// home loop (or `loop`), and closed when the subscription is disposed;
    /// disposing also closes every connection it accepted that is still
    /// open. Bind errors (`EADDRINUSE`, `EACCES`, an address that is not
    /// local, an unknown host) end the signal with a `UVError`. The signal
    /// never completes on its own: only a drain (the `drain` parameter) completes it.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve ("127.0.0.1", "::", "localhost").
    ///   - port: 0...65535; 0 picks a free port (use `serve` to learn which).
    ///   - backlog: The kernel's queue of connections not yet accepted: nil (the default) for the system's
    ///     maximum (`net.core.somaxconn`, read when the server starts); at least 1, else `EINVAL`.
    ///   - options: Socket options and buffer limits for each accepted connection.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`); when the drain finishes the signal completes.
    /// - Returns: A signal of accepted connections.
    ///
    /// Thread rule: safe from any thread.
    public static func listen(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                              on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil) -> Signal<TCPConnection> {
        onLoop("TCPServer.listen", host: host, port: port, backlog: backlog, options: options, on: loop, drain: drain,
               send: Event.sendConnection).debugNamed("+TCPServer.listen(\(host):\(port))")
    }

    /// Like `listen`, but first sends `.listening(address)` with the bound address, then `.accepted` per client.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port, reported by `.listening`.
    ///   - backlog: The kernel's queue of connections not yet accepted: nil (the default) for the system's
    ///     maximum (`net.core.somaxconn`, read when the server starts); at least 1, else `EINVAL`.
    ///   - options: Socket options and buffer limits for each accepted connection.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`): `.draining` is sent, then the signal completes.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread.
    public static func serve(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                             on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil) -> Signal<Event> {
        onLoop("TCPServer.serve", host: host, port: port, backlog: backlog, options: options, on: loop, drain: drain,
               send: Event.sendEvent).debugNamed("+TCPServer.serve(\(host):\(port))")
    }

    /// Listens on `host:port` on every loop of `group` and sends each accepted connection.
    ///
    /// The group form of `listen(host:port:backlog:options:on:drain:)`: see
    /// `serve(host:port:backlog:options:on:onAccepted:drain:)` for where connections live, which
    /// thread each one arrives on, and what ends the signal.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port, shared by every loop's socket.
    ///   - backlog: Each loop's kernel queue of connections not yet accepted: nil (the default) for the
    ///     system's maximum (`net.core.somaxconn`, read when the server starts); at least 1, else `EINVAL`.
    ///   - options: Socket options and buffer limits for each accepted connection; `maxConnections` counts across the group.
    ///   - group: The loops that accept and home the connections; every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread with each connection, before it is sent.
    ///   - drain: Requests to quiesce every loop's share (see `DrainRequest`); the signal completes once all drained.
    /// - Returns: A signal of accepted connections.
    ///
    /// Thread rule: safe from any thread.
    public static func listen(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                              on group: EventLoopGroup, onAccepted: (@Sendable (TCPConnection) -> Void)? = nil,
                              drain: Signal<DrainRequest>? = nil) -> Signal<TCPConnection> {
        onGroup(host: host, port: port, backlog: backlog, options: options, group: group, onAccepted: onAccepted, drain: drain,
                send: Event.sendConnection).debugNamed("+TCPServer.listen(\(host):\(port), on: group)")
    }

    /// Serves `host:port` on every loop of `group`: each loop listens on a socket of its own,
    /// bound to the same address with `SO_REUSEPORT`, and the kernel spreads the clients over them.
    ///
    /// Where things happen:
    /// - A connection lives on the loop that accepted it: its `bytes`, sends and closing run on
    ///   `connection.loop`'s thread.
    /// - `onAccepted` runs there, before `.accepted` is sent: start per-connection work in it
    ///   (a subscription to `connection.bytes` made there is homed on that loop), so every loop
    ///   of the group serves. Work started in the subscriber runs on the subscriber's home loop.
    /// - `.accepted` and `.refused` come from the loop that took the connection, `.listening` from
    ///   the first loop once every socket listens; the subscriber receives them on its home loop,
    ///   `.listening` first, then each loop's connections in that loop's order (none between loops).
    ///
    /// The rest is `serve(host:port:backlog:options:on:drain:)`'s, with `maxConnections` counted
    /// across the group. A port any other socket listens on fails with `EADDRINUSE`, even one with
    /// `SO_REUSEPORT` (it would take part of the clients silently). A loop that has shut down, been
    /// asked to, or never started fails the subscription (`EventLoopError.shutDown` or
    /// `couldNotStart`, naming it) before anything is bound.
    ///
    /// Disposing stops every loop's listening and closes every connection, each on its loop. A
    /// loop that shuts down while the server runs ends only its share (Linux resets the clients
    /// queued on its socket); new clients go to the other loops, and the last loop's shutdown ends
    /// the signal with `EventLoopError.shutDown` naming it.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port, reported by `.listening`.
    ///   - backlog: Each loop's kernel queue of connections not yet accepted: nil (the default) for the
    ///     system's maximum (`net.core.somaxconn`, read when the server starts); at least 1, else `EINVAL`.
    ///   - options: Socket options and buffer limits for each accepted connection; `maxConnections` counts across the group.
    ///   - group: The loops that accept and home the connections; every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread with each connection, before `.accepted` is sent.
    ///   - drain: Requests to quiesce every loop's share (see `DrainRequest`): one `.draining` with the open
    ///     connections of the whole group, then the signal completes once every loop's connections closed.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread; `onAccepted` runs on the connection's loop thread.
    public static func serve(host: String = "127.0.0.1", port: Int, backlog: Int32? = nil, options: TCPOptions = TCPOptions(),
                             on group: EventLoopGroup, onAccepted: (@Sendable (TCPConnection) -> Void)? = nil,
                             drain: Signal<DrainRequest>? = nil) -> Signal<Event> {
        onGroup(host: host, port: port, backlog: backlog, options: options, group: group, onAccepted: onAccepted, drain: drain,
                send: Event.sendEvent).debugNamed("+TCPServer.serve(\(host):\(port), on: group)")
    }

    /// A server on one loop: a `Listener` over a `TCPListeningSocket` per subscription.
    private static func onLoop<Value>(
        _ what: String, host: String, port: Int, backlog: Int32?, options: TCPOptions, on loop: EventLoop?,
        drain: Signal<DrainRequest>?, send: @escaping @Sendable (Event, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        ServerSignal.onLoop(what, on: loop, drain: drain, send: send, socket: { loop in
            TCPListeningSocket(loop: loop, source: .bind(host: host, port: port), backlog: ListenBacklog(backlog), options: options)
        }, simulatedSocket: { loop in
            // A simulated loop always has its simulation's network.
            SimulatedTCPListeningSocket(loop: loop, source: .bind(host: host, port: port), backlog: ListenBacklog(backlog),
                                        options: options, network: loop.simulatedNetwork!)
        })
    }

    /// A server on every loop of `group`: a `GroupServer` with a `SO_REUSEPORT` socket per loop.
    private static func onGroup<Value>(
        host: String, port: Int, backlog: Int32?, options: TCPOptions, group: EventLoopGroup,
        onAccepted: (@Sendable (TCPConnection) -> Void)?, drain: Signal<DrainRequest>?,
        send: @escaping @Sendable (Event, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        // A group's loops are all simulated or all real (a simulation makes its own groups).
        if group.loops[0].isSimulated {
            return ServerSignal.onGroup("TCPServer.serve(on: group)", group: group, options: options, backlog: backlog,
                                        context: "TCPServer.serve(on: group)", onAccepted: onAccepted, drain: drain,
                                        refusingSimulation: nil, send: send) {
                SimulatedTCPListeningSocket.startShares(of: $0, host: host, port: port)
            }
        }
        return ServerSignal.onGroup("TCPServer.serve(on: group)", group: group, options: options, backlog: backlog,
                                    context: "TCPServer.serve(on: group)", onAccepted: onAccepted, drain: drain, send: send) {
            TCPListeningSocket.startShares(of: $0, host: host, port: port)
        }
    }
}

extension TCPServer.Event: ServerEvent {
    /// The connection of `.accepted`; nil for every other event.
    var acceptedConnection: TCPConnection? {
        if case .accepted(let connection) = self { connection } else { nil }
    }

    static func refusing(_ connection: TCPConnection, open: Int) -> TCPServer.Event {
        let peer = connection.address(peer: true)
        // Accepted only to be turned away: a reset tells the client at once and leaves no TIME_WAIT state here.
        connection.end(.closed, reset: true)
        return .refused(peer: peer, open: open)
    }
}

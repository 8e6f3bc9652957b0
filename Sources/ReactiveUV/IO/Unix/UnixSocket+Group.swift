extension UnixSocket {
    /// Listens on `path` for every loop of `group` and sends each accepted connection.
    ///
    /// The group form of `listen(path:backlog:options:on:drain:)`: see
    /// `serve(path:backlog:options:on:onAccepted:drain:)` for where connections live, which
    /// thread each one arrives on, and what ends the signal.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted: nil (the default) for the system's
    ///     maximum (`net.core.somaxconn`, read when the server starts); at least 1, else `EINVAL`.
    ///   - options: Buffer limits, the connection limit (counted across the group), stale-file removal and permissions.
    ///   - group: The loops that home the connections; the first one accepts. Every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread with each connection, before it is sent.
    ///   - drain: Requests to quiesce (see `DrainRequest`); the signal completes once every loop's connections closed.
    /// - Returns: A signal of accepted connections.
    ///
    /// Thread rule: safe from any thread; `onAccepted` runs on the connection's loop thread.
    public static func listen(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                              on group: EventLoopGroup, onAccepted: (@Sendable (UnixConnection) -> Void)? = nil,
                              drain: Signal<DrainRequest>? = nil) -> Signal<UnixConnection> {
        onGroup(path: path, backlog: backlog, options: options, group: group, onAccepted: onAccepted, drain: drain,
                send: Event.sendConnection).debugNamed("+UnixSocket.listen(\(UnixSocketPath.display(path)), on: group)")
    }

    /// Serves `path` on every loop of `group`: the group's first loop accepts, and hands each
    /// connection to a loop of the group in turn (round robin, itself included), where it lives.
    ///
    /// Where things happen:
    /// - One socket is bound (`SO_REUSEPORT` does not exist for Unix sockets), and the group's
    ///   first loop accepts. Each connection goes to the next loop in turn, skipping loops
    ///   that are shutting down, and lives there: its `UnixConnection`'s `bytes`, sends and
    ///   closing run on that loop's thread (`connection.loop`). Round robin rather than the
    ///   least loaded loop: a loop's load is not known to the accepting loop without a hop
    ///   or a shared count per connection event, and with many connections turns even out.
    /// - `onAccepted` is called on that loop's thread with each connection, before
    ///   `.accepted` is sent: work started there (a subscription to `connection.bytes`) runs on
    ///   that loop, so the server uses every loop of the group (`EventLoop.current` there is
    ///   `connection.loop`).
    /// - `.listening` is sent from the first loop, once the socket listens; `.accepted` from
    ///   the connection's loop; `.refused` and `.draining` from the first loop. The subscriber
    ///   receives them on its home loop, as every subscriber does (at once when its home is the
    ///   sending loop, else hopped there): `.listening` first, then the connections of each loop
    ///   in the order that loop received them (no order between two loops).
    ///
    /// The rest is `serve(path:backlog:options:on:drain:)`'s: the path's checks and errors,
    /// the socket file removed when the server ends (not a file put there since),
    /// `maxConnections` counted across the group (a client past it is closed at once by the
    /// first loop, and `.refused` names the count). A loop of the group that has shut down,
    /// been asked to, or never started fails the subscription with `EventLoopError.shutDown`
    /// (or `couldNotStart`) naming it, before anything is bound.
    ///
    /// Disposing closes the socket (removing its file) and every connection the server
    /// accepted, each on its own loop. Another loop that shuts down while the server runs
    /// ends only the connections homed there; new connections go to the other loops (one
    /// already on its way to that loop is closed: its client reads EOF). The first loop's
    /// shutdown ends the server (nothing accepts any more): the signal fails with
    /// `EventLoopError.shutDown` naming it, and every loop's connections close.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted: nil (the default) for the system's
    ///     maximum (`net.core.somaxconn`, read when the server starts); at least 1, else `EINVAL`.
    ///   - options: Buffer limits, the connection limit (counted across the group), stale-file removal and permissions.
    ///   - group: The loops that home the connections; the first one accepts. Every loop must be running.
    ///   - onAccepted: Called on the connection's own loop thread with each connection, before `.accepted` is sent.
    ///   - drain: Requests to quiesce (see `DrainRequest`): the socket closes, one `.draining` with the open
    ///     connections of the whole group, then the signal completes once every loop's connections closed.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread; `onAccepted` runs on the connection's loop thread.
    public static func serve(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                             on group: EventLoopGroup, onAccepted: (@Sendable (UnixConnection) -> Void)? = nil,
                             drain: Signal<DrainRequest>? = nil) -> Signal<Event> {
        onGroup(path: path, backlog: backlog, options: options, group: group, onAccepted: onAccepted, drain: drain,
                send: Event.sendEvent).debugNamed("+UnixSocket.serve(\(UnixSocketPath.display(path)), on: group)")
    }

    /// A server on every loop of `group`: a `GroupServer` whose first loop accepts for all.
    private static func onGroup<Value>(
        path: String, backlog: Int32?, options: UnixSocketOptions, group: EventLoopGroup,
        onAccepted: (@Sendable (UnixConnection) -> Void)?, drain: Signal<DrainRequest>?,
        send: @escaping @Sendable (Event, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        ServerSignal.onGroup("UnixSocket.serve(on: group)", group: group, options: options, backlog: backlog,
                             context: "UnixSocket.serve(on: group)(\(UnixSocketPath.display(path)))", onAccepted: onAccepted,
                             drain: drain, send: send) {
            UnixListeningSocket.startShares(of: $0, path: path)
        }
    }
}

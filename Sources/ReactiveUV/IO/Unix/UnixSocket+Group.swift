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
    /// - One socket is bound (Unix sockets have no `SO_REUSEPORT`) and the first loop accepts.
    ///   Each connection goes to the next loop in turn, skipping loops that are shutting down
    ///   (round robin: the accepting loop cannot know another's load without a hop), and lives
    ///   there: its `bytes`, sends and closing run on `connection.loop`'s thread.
    /// - `onAccepted` runs there, before `.accepted` is sent: start per-connection work in it, so
    ///   every loop of the group serves.
    /// - `.listening`, `.refused` and `.draining` come from the first loop, `.accepted` from the
    ///   connection's loop; the subscriber receives them on its home loop, `.listening` first,
    ///   then each loop's connections in that loop's order (none between loops).
    ///
    /// The rest is `serve(path:backlog:options:on:drain:)`'s, with `maxConnections` counted across
    /// the group (the first loop closes a client past it at once). A loop that has shut down, been
    /// asked to, or never started fails the subscription (`EventLoopError.shutDown` or
    /// `couldNotStart`, naming it) before anything is bound.
    ///
    /// Disposing closes the socket (removing its file) and every connection, each on its loop.
    /// Another loop's shutdown ends only the connections homed there (one on its way there is
    /// closed: its client reads EOF); the first loop's ends the server, failing the signal with
    /// `EventLoopError.shutDown` naming it.
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

    /// A server on every loop of `group`: a `GroupServer` whose first loop accepts for all (on a
    /// simulated group, shares bound together and given the clients in turn).
    private static func onGroup<Value>(
        path: String, backlog: Int32?, options: UnixSocketOptions, group: EventLoopGroup,
        onAccepted: (@Sendable (UnixConnection) -> Void)?, drain: Signal<DrainRequest>?,
        send: @escaping @Sendable (Event, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        // A group's loops are all simulated or all real (a simulation makes its own groups).
        if group.loops[0].isSimulated {
            return ServerSignal.onGroup("UnixSocket.serve(on: group)", group: group, options: options, backlog: backlog,
                                        context: "UnixSocket.serve(on: group)(\(UnixSocketPath.display(path)))", onAccepted: onAccepted,
                                        drain: drain, refusingSimulation: nil, send: send) {
                SimulatedUnixListeningSocket.startShares(of: $0, path: path)
            }
        }
        return ServerSignal.onGroup("UnixSocket.serve(on: group)", group: group, options: options, backlog: backlog,
                             context: "UnixSocket.serve(on: group)(\(UnixSocketPath.display(path)))", onAccepted: onAccepted,
                             drain: drain, send: send) {
            UnixListeningSocket.startShares(of: $0, path: path)
        }
    }
}

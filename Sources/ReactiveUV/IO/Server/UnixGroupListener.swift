/// One Unix-socket server subscription served on every loop of a group (`UnixSocket.serve(on: group)`).
///
/// `SO_REUSEPORT` does not exist for `AF_UNIX`, so one socket is bound, and the group's first
/// loop accepts: its `UnixListener` (the listening share) hands each connection to the next
/// share in turn, itself included, skipping loops that are shutting down; every other loop has a
/// `UnixListener` with no socket (a homing share) that opens the connections handed to it. The
/// listening share takes the shared `ConnectionBudget` at the accept, so a refusal needs no hop.
/// The rest (the shares, failure, disposal and the drain) is `GroupServer`'s; a drain request
/// goes to the listening share first (`DrainOrder.acceptingShareFirst`).
///
/// The first loop's shutdown ends the server (nothing accepts any more: its share's error);
/// another loop's ends only the connections homed there. See docs/INTERNALS.md, "Serving on a group".
///
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; `start()` runs on the
/// first loop's thread; each share's callbacks run on its own loop's thread.
final class UnixGroupListener: GroupServer<UnixListener>, @unchecked Sendable {
    // Adds only immutable settings to `GroupServer`, whose state is behind its lock.

    private let path: String
    private let backlog: ListenBacklog
    private let options: UnixSocketOptions

    init(group: EventLoopGroup, path: String, backlog: ListenBacklog, options: UnixSocketOptions,
         onAccepted: (@Sendable (UnixConnection) -> Void)?, output: GroupServerOutput<UnixSocket.Event>) {
        self.path = path
        self.backlog = backlog
        self.options = options
        super.init(group: group, maxConnections: options.maxConnections, drainOrder: .acceptingShareFirst,
                   onAccepted: onAccepted, output: output)
    }

    /// Checks the loops, makes a share per loop, and starts the listening one (bind, listen, `.listening`).
    ///
    /// Thread rule: the group's first loop's thread.
    func start() {
        let loops = group.loops
        loops[0].assertInEventLoop("UnixGroupListener.start")
        guard everyLoopRuns() else { return }
        // A share's error (a bind error, the first loop's shutdown) ends the server.
        let callbacks = UnixListener.Callbacks(onEvent: { [self] event in send(event) },
                                               onError: { [self] error in fail(error) })
        let shares = loops.indices.map { index in
            UnixListener(loop: loops[index], role: index == 0 ? .listens : .homes, path: path, backlog: backlog,
                         options: options, budget: budget, inGroup: true, callbacks: callbacks)
        }
        guard beginServing(shares) else { return }
        shares[0].homes = shares
        shares[0].start("UnixSocket.serve(on: group)")
    }
}

extension UnixListener: GroupShare {
    typealias Event = UnixSocket.Event
}

extension UnixSocket.Event: GroupServerEvent {
    /// The connection of `.accepted`; nil for every other event.
    var acceptedConnection: UnixConnection? {
        if case .accepted(let connection) = self { connection } else { nil }
    }
}

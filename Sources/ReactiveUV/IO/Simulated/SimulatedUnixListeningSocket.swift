internal import CLibUV

/// A Unix socket server on the simulated network: the simulated side of a `Listener` (see
/// `ListeningSocket`), picked by `UnixSocket.listen`/`serve` on a simulated loop or group.
///
/// Its path is a name in the loop's `SimulatedNetwork`, not a file (`EADDRINUSE` when a server of
/// the simulation holds it); the path's rules are checked as on a real loop. A client's connect
/// succeeds at once (as a Unix socket's does when the backlog has room); the server is told after
/// the latency, and accepts it into a `UnixConnection` over the client's simulated end (an IPC one
/// with `ipc`: connections pass over it as `SimulatedStream+Passing.swift` tells). As a group's
/// share it was bound with the others, and the network gives the clients to the shares in turn
/// (see `startShares`).
///
/// Thread rule: loop thread only, except the immutable settings.
final class SimulatedUnixListeningSocket: ListeningHandle<SimulatedUnixListeningSocket>, ListeningSocket {
    typealias Event = UnixSocket.Event

    /// Virtual time is exact: no margin.
    static let idleMarginMilliseconds: UInt64 = 0

    let accepts = true
    let path: String
    let context: String
    private let network: SimulatedNetwork
    /// A group's share: bound with the others before it starts.
    private let isShare: Bool
    /// Clients whose connect arrived, not yet accepted, oldest first.
    private var pending: [SimulatedStreamEnd] = []
    private var sharedOrigin: StreamOrigin?
    /// Bound and not closed: a client connecting now is taken.
    private(set) var acceptsClients = false

    init(loop: EventLoop, path: String, what: String, backlog: ListenBacklog, options: UnixSocketOptions, network: SimulatedNetwork,
         isShare: Bool = false) {
        self.path = path
        self.network = network
        self.isShare = isShare
        context = "\(what)(\(UnixSocketPath.display(path)))"
        // A share takes clients from its bind with the group: one arriving before its start waits.
        acceptsClients = isShare
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE), options: options, backlog: backlog,
                   origin: isShare ? "UnixSocket.serve(on: group) on loop '\(loop.name)'" : "UnixSocket.listen")
    }

    override var label: String { "unix socket listener on \(place) from \(origin) (simulated)" }

    var place: String { UnixSocketPath.display(path) }

    func start() {
        guard let listener, listener.isServing else { return }
        if isShare {
            // Bound with the group; clients that came before its start are taken now.
            didOpenSimulated(as: UV_NAMED_PIPE)
            for _ in pending.indices { listener.acceptPending() }
            return
        }
        do throws(UVError) {
            _ = try UnixSocketPath(path, context: context)
            try network.bindUnix([self], at: path, context: context)
        } catch {
            return listener.fail(error)
        }
        acceptsClients = true
        didOpenSimulated(as: UV_NAMED_PIPE)
        listener.tell(.listening(path))
    }

    /// A client's connect arrived (a callback of this loop): it waits to be accepted.
    func arrived(_ end: SimulatedStreamEnd) {
        pending.append(end)
        if isHandleOpen { listener?.acceptPending() }
    }

    func accept() throws(UVError) -> UnixConnection {
        guard !pending.isEmpty else { throw UVError(code: UV_EAGAIN.rawValue, context: "accept on \(place)") }
        let end = pending.removeFirst()
        let connection = UnixConnection(loop: loop, limits: options.limits, originLabel: acceptedOrigin, ipc: options.ipc, path: path)
        connection.openSimulated(end)
        return connection
    }


    func close() {
        acceptsClients = false
        network.unbindUnix(self)
        // Clients never accepted read EOF, as when a real server's socket closes.
        for end in pending { end.abandon(reset: false) }
        pending = []
        closeSimulatedHandle()
    }

    override func closeForShutdown() {
        if let listener { listener.loopDidShutDown() } else { close() }
    }

    private var acceptedOrigin: StreamOrigin {
        if let sharedOrigin { return sharedOrigin }
        let made = StreamOrigin("accepted by \(origin)(\(place)) (simulated)", limits: options.limits, peerName: place)
        sharedOrigin = made
        return made
    }

    /// How long no byte crossed the connection's simulated end, in virtual milliseconds.
    static func idleMilliseconds(of connection: StreamConnection) -> UInt64? {
        guard connection.isHandleOpen else { return nil }
        return connection.extrasIfMade?.simulated?.idleMilliseconds
    }

    static func transportRefusal(of options: UnixSocketOptions, context: String) -> UVError? { nil }
}

extension SimulatedUnixListeningSocket {
    /// A Unix server on a simulated group: a share per loop, bound together at the path, `.listening`
    /// sent before any share starts. Each client goes to the next share in turn (as the real group's
    /// first loop hands them round robin; the hop is folded into the connect's latency), so every
    /// share accepts its own clients.
    ///
    /// Thread rule: the coordinator's loop thread.
    static func startShares(of server: GroupServer<SimulatedUnixListeningSocket>, path: String) {
        let coordinator = server.coordinator
        guard let network = coordinator.simulatedNetwork else { return server.fail(coordinator.refusal) }
        let sockets = server.group.loops.map { loop in
            SimulatedUnixListeningSocket(loop: loop, path: path, what: "UnixSocket.serve(on: group)", backlog: server.backlog,
                                         options: server.options, network: network, isShare: true)
        }
        do throws(UVError) {
            let context = sockets[0].context
            _ = try UnixSocketPath(path, context: context)
            try network.bindUnix(sockets, at: path, context: context)
        } catch {
            return server.fail(error)
        }
        let shares = sockets.map { server.makeShare($0) }
        guard server.beginServing(shares) else {
            for socket in sockets { network.unbindUnix(socket) }
            return
        }
        server.send(.listening(path))
        for (share, socket) in zip(shares, sockets) {
            server.start(share, refused: { network.unbindUnix(socket) })
        }
    }
}

extension SimulatedNetwork {
    /// Opens `client` (made, not opened, on `loop`) connected to the server at `path`, at once;
    /// the server hears of it after the latency. `ENOENT` when no server of the simulation holds the path.
    func connectUnix(_ client: UnixConnection, on loop: EventLoop, to path: String, context: String) -> UVError? {
        guard let socket = unixListener(at: path), socket.acceptsClients else {
            return UVError(code: UVError.noSuchFileCode, message: "no server listens on this path in the simulation", context: context)
        }
        let latency = drawLatency()
        let clientEnd = SimulatedStreamEnd(loop: loop, latency: latency)
        let serverEnd = SimulatedStreamEnd(loop: socket.loop, latency: latency)
        SimulatedStreamEnd.connect(clientEnd, serverEnd)
        client.openSimulated(clientEnd)
        let listening = UncheckedSendable(socket)
        SimulatedStreamEnd.message(from: loop, to: socket.loop, after: hop(loop, socket.loop, latency)) {
            let socket = listening.value
            // A server that closed meanwhile: the client reads EOF.
            if socket.acceptsClients { socket.arrived(serverEnd) } else { serverEnd.abandon(reset: false) }
        }
        return nil
    }
}

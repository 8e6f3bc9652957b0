internal import CLibUV

/// A TCP server's socket on the simulated network: the simulated side of a `Listener` (see
/// `ListeningSocket`), picked by `TCPServer` on a simulated loop or group.
///
/// On one loop it binds an address of the loop's `SimulatedNetwork` (port 0: a free one;
/// `EADDRINUSE` when taken); as a group's share it was bound with the others (as `SO_REUSEPORT`
/// sockets are: the network draws a share per client). It is told of each client whose SYN
/// arrived (`arrived`), and accepts it into a `TCPConnection` over the client's simulated end.
/// It is listed with the loop like a libuv handle (the leak check sees it) and closes as a
/// callback of the loop.
///
/// Thread rule: loop thread only, except the immutable settings.
final class SimulatedTCPListeningSocket: ListeningHandle<SimulatedTCPListeningSocket>, ListeningSocket {
    typealias Event = TCPServer.Event

    /// Virtual time is exact: no margin.
    static let idleMarginMilliseconds: UInt64 = 0

    /// Where the socket's address comes from.
    enum Source {
        /// Bind `host:port` (a server on one loop).
        case bind(host: String, port: Int)
        /// Bound already with the group's other shares.
        case share(SocketAddress)
    }

    let accepts = true
    private let source: Source
    private let network: SimulatedNetwork
    private var address: SocketAddress?
    /// Bound and not closed: a client arriving now is taken (queued until the socket starts).
    private(set) var acceptsClients = false
    /// Clients whose SYN arrived, not yet accepted, oldest first.
    private var pending: [(end: SimulatedStreamEnd, peer: SocketAddress)] = []
    private var sharedOrigin: StreamOrigin?

    init(loop: EventLoop, source: Source, backlog: ListenBacklog, options: TCPOptions, network: SimulatedNetwork) {
        self.source = source
        self.network = network
        let origin: String
        switch source {
        case .bind:
            origin = "TCPServer.listen"
        case .share(let bound):
            origin = "TCPServer.listen(on: group) on loop '\(loop.name)'"
            address = bound
            acceptsClients = true
        }
        super.init(loop: loop, byteCount: uv_handle_size(UV_TCP), options: options, backlog: backlog, origin: origin)
    }

    override var label: String { "tcp listener on \(place) from \(origin) (simulated)" }

    var context: String { origin }

    var place: String {
        if let address { return address.description }
        if case .bind(let host, let port) = source { return "\(host):\(port)" }
        return "?"
    }

    func start() {
        guard let listener, listener.isServing else { return }
        guard case .bind(let host, let port) = source else {
            // A share: bound with the group; clients that came before its start are taken now.
            didOpenSimulated(as: UV_TCP)
            for _ in pending.indices { listener.acceptPending() }
            return
        }
        let requested: SocketAddress
        switch network.resolveForBind(host, port: port, on: loop) {
        case .success(let address): requested = address
        case .failure(let error): return listener.fail(error)
        }
        switch network.bind(self, to: requested) {
        case .failure(let error):
            listener.fail(error)
        case .success(let bound):
            address = bound
            acceptsClients = true
            didOpenSimulated(as: UV_TCP)
            listener.tell(.listening(bound))
        }
    }

    /// A client's SYN arrived (a callback of this loop): it waits to be accepted.
    func arrived(_ end: SimulatedStreamEnd, from peer: SocketAddress) {
        pending.append((end, peer))
        if isHandleOpen { listener?.acceptPending() }
    }

    func accept() throws(UVError) -> TCPConnection {
        guard let address, !pending.isEmpty else {
            throw UVError(code: UV_EAGAIN.rawValue, context: "accept on \(place)")
        }
        let (end, peer) = pending.removeFirst()
        let connection = TCPConnection(loop: loop, transport: .tcp, limits: options.limits, originLabel: acceptedOrigin)
        connection.openSimulated(end)
        connection.keepSimulatedAddresses(local: address, peer: peer)
        return connection
    }


    func close() {
        acceptsClients = false
        network.unbind(self)
        // Clients that were never accepted are reset, as the kernel does when the socket closes.
        for (end, _) in pending { end.abandon() }
        pending = []
        closeSimulatedHandle()
    }

    override func closeForShutdown() {
        if let listener { listener.loopDidShutDown() } else { closeSimulatedHandle() }
    }

    private var acceptedOrigin: StreamOrigin {
        if let sharedOrigin { return sharedOrigin }
        let origin = switch source {
        case .bind: StreamOrigin("accepted by TCPServer.listen(\(place)) (simulated)", limits: options.limits)
        case .share: StreamOrigin("accepted by TCPServer.listen(\(place), on: group) on loop '\(loop.name)' (simulated)",
                                  limits: options.limits)
        }
        sharedOrigin = origin
        return origin
    }

    /// How long no byte crossed the connection's simulated end, in virtual milliseconds.
    static func idleMilliseconds(of connection: StreamConnection) -> UInt64? {
        guard connection.isHandleOpen else { return nil }
        return connection.extrasIfMade?.simulated?.idleMilliseconds
    }

    static func transportRefusal(of options: TCPOptions, context: String) -> UVError? {
        TCPOptions.keepAliveRefusal(options.keepAlive, context: context)
    }
}

extension SimulatedTCPListeningSocket {
    /// A server on a simulated group: one share per loop, bound together on the network, `.listening`
    /// sent before any share starts (as `TCPListeningSocket.startShares` does with its sockets).
    ///
    /// Thread rule: the coordinator's loop thread.
    static func startShares(of server: GroupServer<SimulatedTCPListeningSocket>, host: String, port: Int) {
        let coordinator = server.coordinator
        guard let network = coordinator.simulatedNetwork else { return server.fail(coordinator.refusal) }
        let requested: SocketAddress
        switch network.resolveForBind(host, port: port, on: coordinator) {
        case .success(let address): requested = address
        case .failure(let error): return server.fail(error)
        }
        let loops = server.group.loops
        let sockets = loops.map { loop in
            SimulatedTCPListeningSocket(loop: loop, source: .share(requested), backlog: server.backlog,
                                        options: server.options, network: network)
        }
        let bound: SocketAddress
        switch network.bind(sockets, to: requested) {
        case .failure(let error): return server.fail(error)
        case .success(let address): bound = address
        }
        for socket in sockets { socket.address = bound }
        let shares = sockets.map { server.makeShare($0) }
        guard server.beginServing(shares) else {
            for socket in sockets { network.unbind(socket) }
            return
        }
        server.send(.listening(bound))
        for (share, socket) in zip(shares, sockets) {
            server.start(share, refused: { network.unbind(socket) })
        }
    }
}

internal import CLibUV

/// A TCP server's socket on the simulated network: the simulated side of a `Listener` (see
/// `ListeningSocket`), picked by `TCPServer` on a simulated loop.
///
/// It binds an address of the loop's `SimulatedNetwork` (port 0: a free one; `EADDRINUSE` when
/// taken), is told of each client whose SYN arrived (`arrived`), and accepts it into a
/// `TCPConnection` over the client's simulated end. It is listed with the loop like a libuv
/// handle (the leak check sees it) and closes as a callback of the loop.
///
/// Thread rule: loop thread only, except the immutable settings.
final class SimulatedTCPListeningSocket: ListeningHandle<SimulatedTCPListeningSocket>, ListeningSocket {
    /// Virtual time is exact: no margin.
    static let idleMarginMilliseconds: UInt64 = 0

    let accepts = true
    private let host: String
    private let port: Int
    private let network: SimulatedNetwork
    private var address: SocketAddress?
    /// Clients whose SYN arrived, not yet accepted, oldest first.
    private var pending: [(end: SimulatedStreamEnd, peer: SocketAddress)] = []
    private var sharedOrigin: StreamOrigin?

    init(loop: EventLoop, host: String, port: Int, backlog: ListenBacklog, options: TCPOptions, network: SimulatedNetwork) {
        self.host = host
        self.port = port
        self.network = network
        super.init(loop: loop, byteCount: uv_handle_size(UV_TCP), options: options, backlog: backlog, origin: "TCPServer.listen")
    }

    override var label: String { "tcp listener on \(place) from \(origin) (simulated)" }

    var context: String { origin }

    var place: String { address?.description ?? "\(host):\(port)" }

    /// Whether a client arriving now is taken (the socket is open and listening).
    var acceptsClients: Bool { isHandleOpen }

    func start() {
        guard let listener, listener.isServing else { return }
        let requested: SocketAddress
        do {
            requested = try SocketAddress(host: host, port: port)
        } catch {
            // Not a numeric address: the simulated network has no names yet.
            listener.fail(loop.simulationRefusal("DNS", what: "resolving \(host)"))
            return
        }
        switch network.bind(self, to: requested) {
        case .failure(let error):
            listener.fail(error)
        case .success(let bound):
            address = bound
            didOpenSimulated(as: UV_TCP)
            listener.tell(.listening(bound))
        }
    }

    /// A client's SYN arrived (a callback of this loop): it waits to be accepted.
    func arrived(_ end: SimulatedStreamEnd, from peer: SocketAddress) {
        pending.append((end, peer))
        listener?.acceptPending()
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

    func refuse(_ connection: TCPConnection, open: Int) -> TCPServer.Event {
        let peer = connection.address(peer: true)
        connection.end(.closed, reset: true)
        return .refused(peer: peer, open: open)
    }

    func close() {
        network.unbind(self)
        // Clients that were never accepted are reset, as the kernel does when the socket closes.
        for (end, _) in pending { end.abandon() }
        pending = []
        closeSimulatedHandle()
    }

    override func closeForShutdown() {
        if let listener { listener.loopDidShutDown() } else { closeSimulatedHandle() }
    }

    /// `closeHandle()` for this simulated handle: the close callback runs as the loop's next callbacks do.
    private func closeSimulatedHandle() {
        assertInEventLoop()
        guard handleState == .open else { return }
        handleState = .closing
        loop.openHandleList.remove(handleCell.memory)
        willClose()
        let owner = UncheckedSendable(self)
        loop.execute { SimulatedTCPListeningSocket.finishClose(owner.value.handle) }
    }

    private var acceptedOrigin: StreamOrigin {
        if let sharedOrigin { return sharedOrigin }
        let origin = StreamOrigin("accepted by TCPServer.listen(\(place)) (simulated)", limits: options.limits)
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

extension LoopHandleOwner {
    /// `didOpen()` for a handle no libuv call initialized (a simulated one): its type is written
    /// for the leak report, then it is listed with the loop.
    func didOpenSimulated(as type: uv_handle_type) {
        handle.pointee.type = type
        didOpen()
    }
}

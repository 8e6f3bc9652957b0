internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// The network a simulation's loops share: TCP listeners by address and port, and the links
/// between connected ends, with latency and resets drawn from the simulation's seed.
///
/// A connect is a message exchange on virtual time: the SYN reaches the listener's loop after the
/// link's latency (accepted there, or refused when nothing listens), the answer comes back after
/// as long again. Each connection's latency is drawn once (`latency` plus up to `jitter`), so its
/// bytes keep their order; with `resetPerMille` set, that many connections in a thousand are reset
/// (RST both ways) at a time drawn within `resetWithin`.
///
/// Thread rule: the simulation's driving thread (its loops' callbacks).
package final class SimulatedNetwork: @unchecked Sendable {
    // Sendable: touched only on the driving thread, whose callbacks are all its loops'.

    /// What the links do, from the seed.
    ///
    /// Thread rule: a value; safe from any thread.
    package struct Faults: Sendable {
        /// The least one-way delay of a connection.
        package var latency: Duration = .milliseconds(1)
        /// The most a connection's delay exceeds `latency` (drawn per connection).
        package var jitter: Duration = .zero
        /// Connections in a thousand reset at a drawn time (RST both ways).
        package var resetPerMille = 0
        /// The window after the connect in which a drawn reset falls.
        package var resetWithin: Duration = .seconds(1)
        /// Reads in a thousand cut short: the stream is handed a drawn part of what arrived.
        package var shortReadPerMille = 0
        /// Writes in a thousand the peer's kernel takes only part of at first (`SimulatedStream+ShortWrites.swift`).
        package var shortWritePerMille = 0
        /// UDP datagrams in a thousand lost on the way.
        package var datagramLossPerMille = 0
        /// Name lookups in a thousand that fail with `EAI_AGAIN`.
        package var dnsFailurePerMille = 0

        package init() {}
    }

    // Read or counted for each packet and read, never across a call that could re-enter: unchecked.
    @exclusivity(unchecked) package var faults = Faults()
    /// Connections whose reset was armed (drawn from `resetPerMille` or planned) so far.
    package private(set) var resetsInjected = 0
    /// Resets written in a plan (connection number to virtual nanoseconds); they win over a draw.
    package var plannedResets: [Int: UInt64] = [:]
    /// False under a written plan: `resetPerMille` is still drawn (so the other faults keep the
    /// seed's numbers) but arms nothing.
    package var drawsResets = true
    /// Every reset armed (drawn or planned): connection number and when it falls (virtual nanoseconds).
    package private(set) var resetsArmed: [(connection: Int, at: UInt64)] = []
    /// The number the next `connect` gets, from 1 in the order of the connects.
    private var nextConnection = 1
    /// The numbers of the connections a listener accepted (their reset is settled then).
    package private(set) var connectionsAccepted: Set<Int> = []
    /// Told of every read a simulated stream is handed (the bytes, or an empty buffer and the
    /// `UV_EOF` or `UV_ECONNRESET` status), during the loop's callback: the simulation digests
    /// them into its trace.
    @exclusivity(unchecked) package var readObserver: ((UnsafeRawBufferPointer, Int32) -> Void)?
    /// Told, when set, of every read a simulated stream is handed, with the loop reading it and the
    /// stream's peer: the simulation's timeline (`Simulation.timeline`).
    @exclusivity(unchecked) package var streamReadObserver: ((_ loop: String, _ peer: String, UnsafeRawBufferPointer, Int32) -> Void)?
    /// Packets (bytes, FIN, RST, a connect's SYN or answer) sent and not yet landed: the
    /// simulation's `finish()` lets them land before it looks for what is left open.
    @exclusivity(unchecked) package internal(set) var packetsInFlight = 0

    /// The seed's numbers for the faults.
    let random: () -> UInt64
    /// The host table and its DNS faults.
    package var names = SimulatedNames()
    /// The UDP ports and datagrams.
    package let datagrams = SimulatedDatagrams()
    /// Pairs of hosts (loop names) whose packets sent from `start` wait until `heal` (virtual
    /// nanoseconds), then go through.
    @exclusivity(unchecked) private var partitions: [(first: String, second: String, start: UInt64, heal: UInt64)] = []
    /// Listening sockets by address: one, or a group's shares (a client goes to a drawn one).
    private var listeners: [SocketAddress: [SimulatedTCPListeningSocket]] = [:]
    /// Unix socket servers by path (names of the simulation, not files): one socket, or a group's shares.
    private var unixListeners: [String: SimulatedUnixPath] = [:]
    private var nextClientPort = 49_152
    private var nextServerPort = 32_768

    /// A network drawing its faults from `random` (the seed's numbers).
    package init(random: @escaping () -> UInt64) {
        self.random = random
    }

    /// A read is about to be handed to a simulated stream (see `readObserver`).
    func noteRead(_ bytes: UnsafeRawBufferPointer, status: Int32) {
        readObserver?(bytes, status)
    }

    /// Holds every packet between `first` and `second` until `heal` (virtual nanoseconds): TCP
    /// retransmits, so nothing is lost, it arrives a latency after the heal.
    package func partition(_ first: EventLoop, _ second: EventLoop, until heal: UInt64) {
        partition(first.name, second.name, from: first.now.nanoseconds, until: heal)
    }

    /// Holds every packet sent between the loops named `first` and `second` from `start` until
    /// `heal` (virtual nanoseconds); a loop is a host by its name.
    package func partition(_ first: String, _ second: String, from start: UInt64, until heal: UInt64) {
        partitions.append((first, second, start, heal))
    }

    /// How long a packet sent now from `source` to `destination` takes: `latency`, or until a
    /// latency after the partition between them heals.
    func delay(from source: EventLoop, to destination: EventLoop, latency: UInt64) -> UInt64 {
        let now = source.now.nanoseconds
        // Asked for every packet: nothing to look at without partitions.
        if partitions.isEmpty { return latency }
        if partitions.contains(where: { $0.heal <= now }) { partitions.removeAll { $0.heal <= now } }
        var arrival = now &+ latency
        let (from, to) = (source.name, destination.name)
        for held in partitions where held.start <= now
            && ((held.first == from && held.second == to) || (held.first == to && held.second == from)) {
            arrival = max(arrival, held.heal &+ latency)
        }
        return arrival - now
    }

    /// How much of `available` bytes one read hands over: all, or (a short read) a drawn part.
    func readSize(_ available: Int) -> Int {
        guard available > 1, faults.shortReadPerMille > 0, draw(below: 1_000) < UInt64(faults.shortReadPerMille) else {
            return available
        }
        return 1 + Int(draw(below: UInt64(available - 1)))
    }

    private func draw(below bound: UInt64) -> UInt64 {
        bound == 0 ? 0 : random() % bound
    }

    // MARK: - listeners

    /// Binds `sockets` (one, or a group's shares) to `address` (port 0: a free one); `EADDRINUSE` when taken.
    func bind(_ sockets: [SimulatedTCPListeningSocket], to address: SocketAddress) -> Result<SocketAddress, UVError> {
        var bound = address
        if address.port == 0 {
            repeat {
                guard let next = try? SocketAddress(host: address.host, port: nextServerPort) else { break }
                bound = next
                nextServerPort = nextServerPort == 49_151 ? 32_768 : nextServerPort + 1
            } while listeners[bound] != nil
        }
        if listeners[bound] != nil || wildcardTaken(bound) {
            return .failure(UVError(code: UVError.addressInUseCode, context: "bind to \(bound) on the simulated network"))
        }
        listeners[bound] = sockets
        return .success(bound)
    }

    /// `bind` for one socket.
    func bind(_ socket: SimulatedTCPListeningSocket, to address: SocketAddress) -> Result<SocketAddress, UVError> {
        bind([socket], to: address)
    }

    /// Forgets `socket`'s address (the others of its group keep it); new connects to it are refused.
    func unbind(_ socket: SimulatedTCPListeningSocket) {
        for (address, sockets) in listeners where sockets.contains(where: { $0 === socket }) {
            let kept = sockets.filter { $0 !== socket }
            listeners[address] = kept.isEmpty ? nil : kept
        }
    }

    /// Holds `path` for `sockets` (one, or a group's shares); `EADDRINUSE` when a server of the simulation holds it.
    func bindUnix(_ sockets: [SimulatedUnixListeningSocket], at path: String, context: String) throws(UVError) {
        guard unixListeners[path] == nil else {
            throw UVError(code: UVError.addressInUseCode, message: "another server of the simulation listens on this path",
                          context: context)
        }
        unixListeners[path] = SimulatedUnixPath(sockets: sockets)
    }

    /// Frees `socket`'s path once no share of its group holds it.
    func unbindUnix(_ socket: SimulatedUnixListeningSocket) {
        guard var held = unixListeners[socket.path], held.sockets.contains(where: { $0 === socket }) else { return }
        held.sockets.removeAll { $0 === socket }
        unixListeners[socket.path] = held.sockets.isEmpty ? nil : held
    }

    /// The socket the next client connecting to `path` reaches: the one bound there, or a group's
    /// share whose turn it is (round robin, skipping shares that closed or whose loop is shutting down).
    func unixListener(at path: String) -> SimulatedUnixListeningSocket? {
        guard var held = unixListeners[path] else { return nil }
        defer { unixListeners[path] = held }
        return held.takeTurn()
    }

    /// A connection's one-way delay: `latency` plus a drawn part of `jitter`.
    func drawLatency() -> Duration {
        faults.latency + .nanoseconds(Int64(clamping: draw(below: faults.jitter.clampedNanoseconds &+ 1)))
    }

    private func wildcardTaken(_ address: SocketAddress) -> Bool {
        listeners.keys.contains { $0.port == address.port && ($0.isWildcard || address.isWildcard) }
    }

    /// The socket a client connecting to `address` reaches: the one bound there (or on a
    /// wildcard of its port), or a drawn share of a group's that takes clients.
    private func listener(at address: SocketAddress) -> SimulatedTCPListeningSocket? {
        let sockets = listeners[address] ?? listeners.first { $0.key.port == address.port && $0.key.isWildcard }?.value ?? []
        let open = sockets.filter(\.acceptsClients)
        if open.count <= 1 { return open.first ?? sockets.first }
        return open[Int(draw(below: UInt64(open.count)))]
    }

    // MARK: - connecting

    /// Opens `client` (made, not opened, on `loop`) on a simulated end and sends its SYN to
    /// `address`; `answer` runs on `loop` once the answer is back: 0, or `ECONNREFUSED` when
    /// nothing listens there (or the listener closed, or the client gave up, meanwhile).
    func connect(_ client: TCPConnection, on loop: EventLoop, to address: SocketAddress,
                 answer: @escaping (Int32) -> Void) {
        let latency = drawLatency()
        let number = nextConnection
        nextConnection += 1
        let clientEnd = SimulatedStreamEnd(loop: loop, latency: latency)
        let local = (try? SocketAddress(host: address.family == .ipv6 ? "::1" : "127.0.0.1", port: nextClientPort)) ?? address
        nextClientPort = nextClientPort == 65_535 ? 49_152 : nextClientPort + 1
        client.openSimulated(clientEnd)
        client.keepSimulatedAddresses(local: local, peer: address)
        let box = UncheckedSendable(answer)
        // The SYN reaches the listener's loop after the latency; its answer comes back as late again.
        guard let socket = listener(at: address) else {
            // Nothing listens there: the refusal still takes the round trip.
            SimulatedStreamEnd.message(from: loop, to: loop, after: latency * 2) { box.value(UVError.connectionRefusedCode) }
            return
        }
        let serverLoop = socket.loop
        let listening = UncheckedSendable(socket)
        SimulatedStreamEnd.message(from: loop, to: serverLoop, after: hop(loop, serverLoop, latency)) { [self] in
            let socket = listening.value
            guard socket.acceptsClients, !clientEnd.isClosed else {
                SimulatedStreamEnd.message(from: serverLoop, to: loop, after: hop(serverLoop, loop, latency)) {
                    box.value(UVError.connectionRefusedCode)
                }
                return
            }
            let serverEnd = SimulatedStreamEnd(loop: serverLoop, latency: latency)
            SimulatedStreamEnd.connect(clientEnd, serverEnd)
            // Answered before the listener accepts, so the answer leads anything the server sends.
            SimulatedStreamEnd.message(from: serverLoop, to: loop, after: hop(serverLoop, loop, latency)) { box.value(0) }
            socket.arrived(serverEnd, from: local)
            drawReset(serverEnd, connection: number)
        }
    }

    /// One packet's delay from `source` to `destination`, partitions counted.
    func hop(_ source: EventLoop, _ destination: EventLoop, _ latency: Duration) -> Duration {
        .nanoseconds(Int64(clamping: delay(from: source, to: destination, latency: latency.clampedNanoseconds)))
    }

    /// With `resetPerMille`, resets this connection at a drawn time (both ends get RST); with a
    /// plan, at the plan's time (at once if it has passed) instead.
    private func drawReset(_ serverEnd: SimulatedStreamEnd, connection: Int) {
        let now = serverEnd.loop.now.nanoseconds
        connectionsAccepted.insert(connection)
        var at: UInt64?
        if faults.resetPerMille > 0, draw(below: 1_000) < UInt64(faults.resetPerMille) {
            at = now &+ draw(below: UInt64(clamping: faults.resetWithin.clampedNanoseconds &+ 1))
        }
        if !drawsResets { at = nil }
        if let planned = plannedResets[connection] { at = planned }
        guard let at else { return }
        resetsInjected += 1
        resetsArmed.append((connection, at))
        serverEnd.injectReset(after: .nanoseconds(Int64(clamping: at > now ? at - now : 0)))
    }
}

extension SocketAddress {
    /// `0.0.0.0` or `::`: every address of the host.
    var isWildcard: Bool { host == "0.0.0.0" || host == "::" }
}

/// The sockets holding one Unix path: a server's, or a group's shares taking clients in turn.
///
/// Thread rule: a value kept by `SimulatedNetwork` (its driving thread).
struct SimulatedUnixPath {
    var sockets: [SimulatedUnixListeningSocket]
    /// The share the next client goes to.
    private var next = 0

    init(sockets: [SimulatedUnixListeningSocket]) {
        self.sockets = sockets
    }

    /// The share whose turn it is among those taking clients (the first socket when none does).
    mutating func takeTurn() -> SimulatedUnixListeningSocket? {
        for _ in sockets.indices {
            let socket = sockets[next % sockets.count]
            next = (next + 1) % sockets.count
            if socket.acceptsClients && !socket.loop.shutdownRequested { return socket }
        }
        return sockets.first
    }
}

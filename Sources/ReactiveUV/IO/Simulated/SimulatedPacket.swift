@_spi(SchedulerImplementation) import ReactiveUVCore

/// One packet between simulated loops: a timer of the sender, then (between loops) work from
/// outside for the receiver, as a packet would take. Both hops capture the packet alone, so
/// neither allocates a closure context: a stream's bytes cost the packet and the sender's timer.
///
/// Thread rule: the simulation's driving thread, inside its loops' callbacks.
final class SimulatedPacket: @unchecked Sendable {
    // Sendable: made and landed on the simulation's driving thread, inside its loops' callbacks.

    /// What lands.
    enum Content {
        /// Work run on the destination loop.
        case work(@Sendable () -> Void)
        /// A call on a stream's end, if it still exists (a passed socket's arrival).
        case arrive(@Sendable (SimulatedStreamEnd) -> Void)
        /// Bytes for a stream's end, if it still exists.
        case bytes(ArraySlice<UInt8>)
        /// FIN (`UV_EOF`) or RST (`UV_ECONNRESET`) for a stream's end, if it still exists.
        case end(Int32)
    }

    private let content: Content
    /// The end `.arrive`, `.bytes` and `.end` land at (each stream owns its own end: a packet keeps none alive).
    private weak var peer: SimulatedStreamEnd?
    private let network: SimulatedNetwork?
    private let destination: EventLoop
    private let crossesLoops: Bool

    private init(_ content: Content, peer: SimulatedStreamEnd?, network: SimulatedNetwork?, source: EventLoop, destination: EventLoop) {
        self.content = content
        self.peer = peer
        self.network = network
        self.destination = destination
        crossesLoops = source !== destination
    }

    /// Lands `content` on `destination` (at `peer` for a stream's bytes and end) `delay` after now on `source`.
    static func send(_ content: Content, at peer: SimulatedStreamEnd? = nil, from source: EventLoop, to destination: EventLoop,
                     after delay: Duration) {
        let packet = SimulatedPacket(content, peer: peer, network: source.simulatedNetwork, source: source, destination: destination)
        packet.network?.packetsInFlight += 1
        _ = source.schedule(after: delay) { packet.reachDestination() }
    }

    private func reachDestination() {
        if crossesLoops { destination.execute { self.land() } } else { land() }
    }

    private func land() {
        network?.packetsInFlight -= 1
        switch content {
        case .work(let body): body()
        case .arrive(let body): if let peer { body(peer) }
        case .bytes(let bytes): peer?.receive(bytes)
        case .end(let code): peer?.receiveEnd(code)
        }
    }
}

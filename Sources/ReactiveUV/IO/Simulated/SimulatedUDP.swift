internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// The UDP side of a simulated network: bound ports by address, and the datagrams between them,
/// numbered from 1 in the order they are sent.
///
/// A datagram takes the latency plus a jitter drawn for it alone (so datagrams may overtake each
/// other, as UDP's do); it is lost when drawn (`datagramLossPerMille`) or planned
/// (`plannedDrops`), when a partition separates the hosts (UDP does not retransmit), when nothing
/// is bound at its address, or when the receiver's buffer is full; a loss is silent, as on a
/// real network.
///
/// Thread rule: the simulation's driving thread (its loops' callbacks).
package final class SimulatedDatagrams: @unchecked Sendable {
    // Sendable: touched only on the driving thread, whose callbacks are all its loops'.

    private var ports: [SocketAddress: SimulatedUDPPort] = [:]
    private var nextPort = 32_768
    private var nextDatagram = 1
    /// Datagrams written in a plan to be lost, by number.
    package var plannedDrops: Set<Int> = []
    /// Datagrams lost by a draw or a plan so far, by number.
    package private(set) var dropsArmed: [Int] = []
    /// Datagrams sent so far.
    package var sentCount: Int { nextDatagram - 1 }

    package init() {}

    /// Binds `handle` at `address` (port 0: a free one); `EADDRINUSE` when taken, a wildcard
    /// clashing with any address of its port.
    func bind(_ handle: UDPHandle, at address: SocketAddress) -> Result<SimulatedUDPPort, UVError> {
        var bound = address
        if address.port == 0 {
            repeat {
                guard let next = try? SocketAddress(host: address.host, port: nextPort) else { break }
                bound = next
                nextPort = nextPort == 60_999 ? 32_768 : nextPort + 1
            } while isTaken(bound)
        }
        if isTaken(bound) {
            return .failure(UVError(code: UVError.addressInUseCode, context: "bind to \(bound) on the simulated network"))
        }
        let port = SimulatedUDPPort(handle: handle, address: bound)
        ports[bound] = port
        return .success(port)
    }

    func unbind(_ port: SimulatedUDPPort) {
        if ports[port.address] === port { ports[port.address] = nil }
    }

    private func isTaken(_ address: SocketAddress) -> Bool {
        ports[address] != nil || ports.keys.contains { $0.port == address.port && ($0.isWildcard || address.isWildcard) }
    }

    /// The port a datagram to `address` reaches: bound there, or on a wildcard of its port and family.
    private func port(at address: SocketAddress) -> SimulatedUDPPort? {
        ports[address] ?? ports.first { $0.key.port == address.port && $0.key.isWildcard && $0.key.family == address.family }?.value
    }

    /// Sends `bytes` from `sender` to `address`: nil (the kernel took it: it travels, or is lost
    /// silently), or the error the kernel gives for a bad destination.
    func send(_ bytes: [UInt8], from sender: SimulatedUDPPort, to address: SocketAddress, on network: SimulatedNetwork) -> UVError? {
        if sender.address.family == .ipv4 && address.family != .ipv4 {
            return UVError(code: UV_EAFNOSUPPORT.rawValue, message: "an IPv4 socket cannot send to an IPv6 address",
                           context: "send to \(address)")
        }
        if address.port == 0 {
            return UVError(code: UVError.invalidArgumentCode, message: "a datagram cannot go to port 0", context: "send to \(address)")
        }
        let number = nextDatagram
        nextDatagram += 1
        let latency = network.drawLatency()
        var lost = false
        if network.faults.datagramLossPerMille > 0, network.random() % 1_000 < UInt64(network.faults.datagramLossPerMille) {
            lost = network.drawsResets
        }
        if plannedDrops.contains(number) { lost = true }
        if lost {
            dropsArmed.append(number)
            return nil
        }
        guard let receiver = port(at: address) else { return nil }  // no listener: the datagram vanishes
        let source = sender.handle.loop
        let delay = network.delay(from: source, to: receiver.loop, latency: latency.clampedNanoseconds)
        guard delay <= latency.clampedNanoseconds else { return nil }  // partitioned: UDP does not retransmit
        let datagram = Datagram(bytes: bytes, sender: sender.visibleAddress)
        let box = UncheckedSendable(receiver)
        SimulatedStreamEnd.message(from: source, to: receiver.loop, after: latency) { box.value.arrive(datagram) }
        return nil
    }
}

/// A bound UDP socket's simulated side: the datagrams that arrived and wait to be read.
///
/// Thread rule: loop thread only (its socket's).
final class SimulatedUDPPort: @unchecked Sendable {
    // Sendable: touched on its loop's thread only (a datagram from another loop lands as work of this one).

    /// Linux's default receive buffer (`net.core.rmem_default`): datagrams past it are dropped.
    static let receiveBufferBytes = 212_992

    /// The socket, which owns this port from its bind until its close callback.
    unowned(unsafe) let handle: UDPHandle
    let loop: EventLoop
    let address: SocketAddress
    private var queue: [Datagram] = []
    private var queuedBytes = 0
    private var receiving = false
    private var readQueued = false
    private(set) var isOpen = true

    init(handle: UDPHandle, address: SocketAddress) {
        self.handle = handle
        loop = handle.loop
        self.address = address
    }

    /// The sender address a peer sees: the bound one, a wildcard shown as the loopback of its family.
    var visibleAddress: SocketAddress {
        guard address.isWildcard else { return address }
        return (try? SocketAddress(host: address.family == .ipv4 ? "127.0.0.1" : "::1", port: address.port)) ?? address
    }

    func startReceiving() {
        receiving = true
        queueReadIfReady()
    }

    func stopReceiving() {
        receiving = false
    }

    func close() {
        isOpen = false
        receiving = false
        queue = []
        queuedBytes = 0
        loop.simulatedNetwork?.datagrams.unbind(self)
    }

    fileprivate func arrive(_ datagram: Datagram) {
        guard isOpen, queuedBytes + datagram.bytes.count <= Self.receiveBufferBytes else { return }
        queue.append(datagram)
        queuedBytes += datagram.bytes.count
        queueReadIfReady()
    }

    private func queueReadIfReady() {
        guard receiving, !readQueued, !queue.isEmpty else { return }
        readQueued = true
        loop.execute { [self] in readOnce() }
    }

    /// One datagram to the reader, as libuv's receive callback hands it.
    private func readOnce() {
        readQueued = false
        guard receiving, isOpen, !queue.isEmpty else { return }
        let datagram = queue.removeFirst()
        queuedBytes -= datagram.bytes.count
        datagram.bytes.withUnsafeBytes { loop.simulatedNetwork?.noteRead($0, status: 0) }
        handle.receivedSimulated(datagram)
        queueReadIfReady()
    }
}

extension UDPHandle {
    /// `uv_udp_init` and `uv_udp_bind` on the simulated network: the bound address, or `EADDRINUSE`.
    func bindSimulated(_ address: SocketAddress, on network: SimulatedNetwork) -> Result<SocketAddress, UVError> {
        network.datagrams.bind(self, at: address).map { port in
            simulated = port
            didOpenSimulated(as: UV_UDP)
            return port.address
        }
    }

    /// `uv_udp_try_send` on the simulated network.
    func sendSimulated(_ bytes: [UInt8], to address: SocketAddress, from port: SimulatedUDPPort) -> UVError? {
        guard let network = loop.simulatedNetwork else { return loop.simulationRefusal("UDP", what: "send to \(address)") }
        return network.datagrams.send(bytes, from: port, to: address, on: network)
    }

    /// `closeHandle()` for a simulated socket: the port is freed now, the close callback runs as a callback of the loop.
    func closeSimulated() {
        if closeSimulatedHandle() { simulated?.close() }
    }
}

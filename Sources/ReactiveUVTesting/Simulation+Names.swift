import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

extension Simulation {
    /// Names a simulated host: `DNS.resolve(name)`, `TCP.connect(host: name, ...)`, `UDP.bind`
    /// and a server's `host:` on this simulation's loops resolve `name` (case-insensitive) to
    /// `addresses`, in this order, a round trip of virtual time after the lookup starts. A name
    /// not given fails as a real lookup does, with `EAI_NONAME`; `localhost` is `127.0.0.1`
    /// and `::1` until given again.
    ///
    /// - Parameters:
    ///   - name: The host name.
    ///   - addresses: Numeric IPv4 or IPv6 addresses (a listener or UDP socket bound there answers).
    /// - Throws: `SimulationMisuse` for an empty name, a numeric one, no address or one not
    ///   numeric; nothing is changed.
    ///
    /// Thread rule: the driving thread.
    public func addHost(_ name: String, addresses: [String]) throws(SimulationMisuse) {
        if name.isEmpty { throw SimulationMisuse("addHost: the name is empty") }
        if (try? SocketAddress(host: name, port: 0)) != nil {
            throw SimulationMisuse("addHost: '\(name)' is a numeric address, not a name")
        }
        if addresses.isEmpty { throw SimulationMisuse("addHost: '\(name)' needs at least one address") }
        for address in addresses where (try? SocketAddress(host: address, port: 0)) == nil {
            throw SimulationMisuse("addHost: '\(address)' (for '\(name)') is not a numeric IPv4 or IPv6 address")
        }
        network.names.set(name, to: addresses)
    }

    /// How many UDP datagrams were sent on the simulated network so far (lost ones included).
    ///
    /// Thread rule: the driving thread.
    public var datagramsSent: Int { network.datagrams.sentCount }

    /// Arms a DNS failure, a datagram drop or a clock jump (checked by `SimulationFault.refusal`).
    func injectNetworkFault(_ fault: SimulationFault) {
        switch fault {
        case .dnsFailure(let host, let at, let duration):
            let start = at.clampedNanoseconds
            let (end, overflow) = start.addingReportingOverflow(duration.clampedNanoseconds)
            network.names.fail(host, from: start, through: overflow ? .max : end)
            faultsArmed.append(fault)
        case .dropDatagram(let datagram):
            network.datagrams.plannedDrops.insert(datagram)
        case .clockJump(let by, let at):
            planClockJump(by: by.clampedNanoseconds, at: at.clampedNanoseconds)
            faultsArmed.append(fault)
        default:
            break
        }
    }

    /// The DNS failures and datagram drops drawn from the seed (and planned drops that struck), as plan entries.
    var drawnNetworkFaults: [SimulationFault] {
        network.names.drawnFailures.map { .dnsFailure(host: $0.host, at: .nanoseconds(Int64(clamping: $0.at)), for: .zero) }
            + network.datagrams.dropsArmed.map { .dropDatagram(datagram: $0) }
    }
}

extension SimulationFault {
    /// What is wrong with a DNS failure, a datagram drop or a clock jump, or nil.
    var networkRefusal: String? {
        switch self {
        case .dnsFailure(let host, let at, let duration):
            if host.isEmpty { return "a DNS failure needs a host name, got an empty one" }
            if at < .zero { return "a DNS failure's time must not be negative, got \(at)" }
            if duration < .zero { return "a DNS failure's duration must not be negative, got \(duration)" }
        case .dropDatagram(let datagram):
            if datagram < 1 { return "a dropped datagram's number starts at 1, got \(datagram)" }
        case .clockJump(let by, let at):
            if by <= .zero { return "a clock jump goes forward (the simulated clock is monotonic), got \(by)" }
            if at < .zero { return "a clock jump's time must not be negative, got \(at)" }
        default:
            break
        }
        return nil
    }
}

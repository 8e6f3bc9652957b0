import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// What a simulation's network does to its TCP connections, each drawn from the seed: one way
/// takes `latency` plus up to `jitter` (drawn per connection, so its bytes keep their order), and
/// `resetPerMille` connections in a thousand are reset both ways at a time drawn within
/// `resetWithin` of their connect.
///
/// Thread rule: a value; safe from any thread.
public struct SimulationNetworkFaults: Sendable, Equatable {
    /// The least one-way delay (default 1 ms).
    public var latency: Duration
    /// The most a connection's one-way delay exceeds `latency` (default none).
    public var jitter: Duration
    /// Connections in a thousand reset at a drawn time, 0...1000 (default 0).
    public var resetPerMille: Int
    /// The window after a connect in which a drawn reset falls (default 1 s).
    public var resetWithin: Duration
    /// Reads in a thousand cut short, 0...1000 (default 0): the reader is handed a drawn part of
    /// what arrived, the rest in later reads, as a socket may.
    public var shortReadPerMille: Int
    /// Writes in a thousand cut short, 0...1000 (default 0): the peer's kernel takes a drawn part
    /// at once and the rest as its window opens (a latency at a time, maybe short again); the
    /// write completes when the last byte is taken, and later writes and FIN wait behind it.
    public var shortWritePerMille: Int
    /// UDP datagrams in a thousand lost on the way, 0...1000 (default 0); each joins
    /// `Simulation.injectedFaults` as a `.dropDatagram`.
    public var datagramLossPerMille: Int
    /// Name lookups in a thousand that fail with `EAI_AGAIN`, 0...1000 (default 0); each joins
    /// `Simulation.injectedFaults` as a `.dnsFailure` of its name and time.
    public var dnsFailurePerMille: Int

    /// Faults as given; `Simulation.setNetworkFaults(_:)` checks them.
    ///
    /// Thread rule: safe from any thread.
    public init(latency: Duration = .milliseconds(1), jitter: Duration = .zero, resetPerMille: Int = 0,
                resetWithin: Duration = .seconds(1), shortReadPerMille: Int = 0, shortWritePerMille: Int = 0,
                datagramLossPerMille: Int = 0, dnsFailurePerMille: Int = 0) {
        self.latency = latency
        self.jitter = jitter
        self.resetPerMille = resetPerMille
        self.resetWithin = resetWithin
        self.shortReadPerMille = shortReadPerMille
        self.shortWritePerMille = shortWritePerMille
        self.datagramLossPerMille = datagramLossPerMille
        self.dnsFailurePerMille = dnsFailurePerMille
    }

    /// What is wrong with these faults, or nil.
    var refusal: String? {
        if latency < .zero { return "latency must not be negative, got \(latency)" }
        if jitter < .zero { return "jitter must not be negative, got \(jitter)" }
        if !(0...1_000).contains(resetPerMille) { return "resetPerMille must be in 0...1000, got \(resetPerMille)" }
        if resetWithin < .zero { return "resetWithin must not be negative, got \(resetWithin)" }
        for (name, value) in [("shortReadPerMille", shortReadPerMille), ("shortWritePerMille", shortWritePerMille),
                              ("datagramLossPerMille", datagramLossPerMille), ("dnsFailurePerMille", dnsFailurePerMille)]
        where !(0...1_000).contains(value) {
            return "\(name) must be in 0...1000, got \(value)"
        }
        return nil
    }
}

extension Simulation {
    /// The faults the network draws from the seed for each new connection.
    ///
    /// Thread rule: the driving thread.
    public var networkFaults: SimulationNetworkFaults {
        let faults = network.faults
        return SimulationNetworkFaults(latency: faults.latency, jitter: faults.jitter,
                                       resetPerMille: faults.resetPerMille, resetWithin: faults.resetWithin,
                                       shortReadPerMille: faults.shortReadPerMille, shortWritePerMille: faults.shortWritePerMille,
                                       datagramLossPerMille: faults.datagramLossPerMille, dnsFailurePerMille: faults.dnsFailurePerMille)
    }

    /// Sets the faults for the connections made from now on.
    ///
    /// - Throws: `SimulationMisuse` naming the field (a negative duration, `resetPerMille`
    ///   outside 0...1000); the faults stay as they were.
    ///
    /// Thread rule: the driving thread.
    public func setNetworkFaults(_ faults: SimulationNetworkFaults) throws(SimulationMisuse) {
        if let refusal = faults.refusal { throw SimulationMisuse("setNetworkFaults: " + refusal) }
        var set = SimulatedNetwork.Faults()
        set.latency = faults.latency
        set.jitter = faults.jitter
        set.resetPerMille = faults.resetPerMille
        set.resetWithin = faults.resetWithin
        set.shortReadPerMille = faults.shortReadPerMille
        set.shortWritePerMille = faults.shortWritePerMille
        set.datagramLossPerMille = faults.datagramLossPerMille
        set.dnsFailurePerMille = faults.dnsFailurePerMille
        network.faults = set
    }

    /// Cuts `first` off from `second` (two hosts: loops of this simulation) for `duration` of
    /// virtual time from now: their packets (bytes, FIN, RST, a connect's SYN and answer) wait,
    /// as TCP's retransmissions would, and arrive a latency after the partition heals. Other
    /// pairs are untouched.
    ///
    /// - Throws: `SimulationMisuse` for a loop not of this simulation, the same loop twice, or a
    ///   negative duration; nothing is changed.
    ///
    /// Thread rule: the driving thread.
    public func partition(_ first: EventLoop, _ second: EventLoop, for duration: Duration) throws(SimulationMisuse) {
        guard loops.contains(where: { $0 === first }), loops.contains(where: { $0 === second }) else {
            throw SimulationMisuse("partition: both loops must be this simulation's ('\(first.name)', '\(second.name)')")
        }
        guard first !== second else { throw SimulationMisuse("partition: a loop cannot be cut off from itself ('\(first.name)')") }
        guard duration >= .zero else { throw SimulationMisuse("partition: the duration must not be negative, got \(duration)") }
        let (heal, overflow) = now.nanoseconds.addingReportingOverflow(duration.clampedNanoseconds)
        network.partition(first, second, until: overflow ? .max : heal)
        faultsArmed.append(.partition(first.name, second.name, at: .nanoseconds(Int64(clamping: now.nanoseconds)), for: duration))
    }

    /// How many connections had a reset armed so far (drawn from the seed or planned); one that
    /// ended before its reset's time is counted but left alone.
    ///
    /// Thread rule: the driving thread.
    public var networkResetsInjected: Int { network.resetsInjected }
}

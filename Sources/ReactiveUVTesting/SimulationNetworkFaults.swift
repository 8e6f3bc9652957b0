import ReactiveUV

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

    /// Faults as given; `Simulation.setNetworkFaults(_:)` checks them.
    ///
    /// Thread rule: safe from any thread.
    public init(latency: Duration = .milliseconds(1), jitter: Duration = .zero, resetPerMille: Int = 0,
                resetWithin: Duration = .seconds(1)) {
        self.latency = latency
        self.jitter = jitter
        self.resetPerMille = resetPerMille
        self.resetWithin = resetWithin
    }

    /// What is wrong with these faults, or nil.
    var refusal: String? {
        if latency < .zero { return "latency must not be negative, got \(latency)" }
        if jitter < .zero { return "jitter must not be negative, got \(jitter)" }
        if !(0...1_000).contains(resetPerMille) { return "resetPerMille must be in 0...1000, got \(resetPerMille)" }
        if resetWithin < .zero { return "resetWithin must not be negative, got \(resetWithin)" }
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
                                       resetPerMille: faults.resetPerMille, resetWithin: faults.resetWithin)
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
        network.faults = set
    }

    /// How many connections the drawn resets have reset so far.
    ///
    /// Thread rule: the driving thread.
    public var networkResetsInjected: Int { network.resetsInjected }
}

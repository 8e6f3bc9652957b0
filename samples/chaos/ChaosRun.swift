import EchoServerKit
import ReactiveUV
import ReactiveUVTesting

/// What one chaos run found.
struct ChaosOutcome {
    let seed: UInt64
    /// Clients that got back exactly what they sent.
    var echoed = 0
    /// Clients whose connection ended with an error (a reset), having got back a part of what they sent.
    var reportedErrors = 0
    /// The faults injected, by time.
    var faults: [SimulationFault] = []
    /// The trace's hash, 16 hexadecimal digits.
    var trace = ""
    /// What broke the promise: a client given other bytes, a server that did not drain, a leak.
    var failures: [String] = []
}

/// The echo server on a simulated group of two loops, `clients` clients on two client hosts,
/// faults drawn from `seed`, a graceful drain at `virtualTime`.
struct ChaosRun {
    let seed: UInt64
    let clients: Int
    let virtualTime: Duration

    /// The sample's own draws (fault rates, partitions, payloads), apart from the simulation's.
    private struct Draws {
        var generator: SeededRandomNumberGenerator

        /// A number in `range`.
        mutating func number(_ range: ClosedRange<Int>) -> Int {
            range.lowerBound + Int(generator.next() % UInt64(range.count))
        }

        /// A duration in `0..<limit`, whole microseconds.
        mutating func time(below limit: Duration) -> Duration {
            let (seconds, attoseconds) = limit.components
            let microseconds = UInt64(max(1, seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
            return .microseconds(Int64(generator.next() % microseconds))
        }
    }

    /// One client's plan: when it connects, what it sends, in which pieces and when.
    private struct ClientPlan {
        let host: Int
        let start: Duration
        let payload: [UInt8]
        /// Each piece's end offset in `payload` and its delay after the connect.
        let pieces: [(end: Int, after: Duration)]
    }

    func run() -> ChaosOutcome {
        var outcome = ChaosOutcome(seed: seed)
        var draws = Draws(generator: SeededRandomNumberGenerator(seed: seed ^ 0x5DEE_CE66_D1CE_4E5B))
        let simulation = Simulation(seed: seed, loopName: "chaos")
        let group = simulation.makeGroup(loopCount: 2, name: "echo")
        let hosts = (0..<2).map { simulation.makeLoop(name: "client-\($0)") }
        let quarter = virtualTime / 4
        do {
            try simulation.setNetworkFaults(SimulationNetworkFaults(
                latency: .milliseconds(1), jitter: .microseconds(Int64(draws.number(0...4_000))),
                resetPerMille: draws.number(0...250), resetWithin: virtualTime / 2,
                shortReadPerMille: draws.number(0...500)))
            for _ in 0..<draws.number(0...2) {
                try simulation.inject(.partition(group.loops[draws.number(0...1)].name, hosts[draws.number(0...1)].name,
                                                 at: draws.time(below: virtualTime / 2), for: draws.time(below: virtualTime / 8)))
            }
            // The echo sample's server, as it runs it: a group, and a graceful drain closing idle clients.
            let drain = Signal<Void>.timer(after: virtualTime).map { _ in
                TCPServer.DrainRequest.graceful(timeout: .seconds(1), closingIdle: true)
            }
            let server = try simulation.record(EchoServer.run(port: 7000, on: group, drain: drain))
            var plans: [ClientPlan] = []
            var recorders: [EventRecorder<[UInt8]>] = []
            for index in 0..<clients {
                let plan = makePlan(index, draws: &draws, within: quarter)
                plans.append(plan)
                recorders.append(try simulation.record(client(plan), on: hosts[plan.host]))
            }
            simulation.runUntilIdle()
            outcome.failures += check(server: server)
            for (index, recorder) in recorders.enumerated() {
                outcome.failures += check(client: index, recorder, sent: plans[index].payload, outcome: &outcome)
            }
        } catch {
            outcome.failures.append("the run could not be set up: \(error)")
        }
        outcome.failures += simulation.finish().problems
        outcome.faults = simulation.injectedFaults
        outcome.trace = simulation.trace.hashHex
        return outcome
    }

    /// A client's start, payload (1 byte to 20 KB) and up to four pieces spread over a sixteenth each.
    private func makePlan(_ index: Int, draws: inout Draws, within window: Duration) -> ClientPlan {
        let start = draws.time(below: window)
        let size = draws.number(1...20_000)
        let salt = UInt8(truncatingIfNeeded: draws.number(0...255))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ salt }
        var cuts = (1..<draws.number(1...4)).map { _ in draws.number(0...size) } + [size]
        cuts.sort()
        var after = Duration.zero
        let pieces = cuts.map { end -> (end: Int, after: Duration) in
            defer { after += draws.time(below: virtualTime / 16) }
            return (end, after)
        }
        return ClientPlan(host: index % 2, start: start, payload: payload, pieces: pieces)
    }

    /// Connects at the plan's start, sends its pieces on time, half-closes after the last, and
    /// collects the echo until the server closes.
    private func client(_ plan: ClientPlan) -> Signal<[UInt8]> {
        Signal<Void>.timer(after: plan.start)
            .flatMap { _ in TCP.connect(host: "127.0.0.1", port: 7000) }
            .flatMap { connection -> Signal<[UInt8]> in
                var begin = 0
                for piece in plan.pieces {
                    let bytes = Array(plan.payload[begin..<piece.end])
                    begin = piece.end
                    let isLast = piece.end == plan.payload.count
                    _ = connection.loop.schedule(after: piece.after) {
                        if !bytes.isEmpty { connection.send(bytes) }
                        if isLast { connection.shutdown() }
                    }
                }
                return connection.bytes
            }
    }

    private func check(server: EventRecorder<EchoEvent>) -> [String] {
        switch server.terminal {
        case .completed?: return []
        case .error(let error)?: return ["the server failed: \(error)"]
        case nil, .next?: return ["the server did not drain"]
        }
    }

    private func check(client index: Int, _ recorder: EventRecorder<[UInt8]>, sent: [UInt8], outcome: inout ChaosOutcome) -> [String] {
        let received = Array(recorder.values.joined())
        switch recorder.terminal {
        case .completed?:
            if received == sent {
                outcome.echoed += 1
                return []
            }
            return ["client \(index) got \(received.count) bytes back of its \(sent.count), without an error"]
        case .error?:
            outcome.reportedErrors += 1
            return received.count <= sent.count && received[...] == sent[..<received.count]
                ? [] : ["client \(index) got \(received.count) bytes back that are not what it sent"]
        case nil, .next?:
            return ["client \(index) never ended"]
        }
    }
}

// The simulation speed workload, shared by the benchmark runner and the Profile modes: an echo
// server and many clients on a simulated network, each client sending a message every few
// virtual seconds, under faults drawn from a seed (latency and jitter, short reads, resets with
// reconnect, partitions that heal). Everything runs on the calling thread, as a simulation does.
import Foundation
import ReactiveUV
import ReactiveUVTesting

/// How big a simulated echo run is.
///
/// Thread rule: a value; safe from any thread.
public struct SimulatedEchoSize: Sendable {
    /// Clients, each on one connection at a time (spread over `hosts` client loops).
    public var clients: Int
    /// Virtual time the clients exchange messages for.
    public var virtualTime: Duration
    /// Time between two messages of one client.
    public var period: Duration
    /// Bytes in one message.
    public var messageSize: Int
    /// Client loops (hosts); the server has a loop of its own.
    public var hosts: Int

    /// `clients` clients for `virtualTime`, a 64-byte message every 5 s each, on 4 client hosts.
    public init(clients: Int = 1_000, virtualTime: Duration = .seconds(3_600), period: Duration = .seconds(5),
                messageSize: Int = 64, hosts: Int = 4) {
        self.clients = clients
        self.virtualTime = virtualTime
        self.period = period
        self.messageSize = messageSize
        self.hosts = hosts
    }
}

/// What one simulated echo run did, and how long it took on the wall clock.
///
/// Thread rule: a value; safe from any thread.
public struct SimulatedEchoFigures: Sendable {
    /// Virtual time covered.
    public var virtualTime: Duration = .zero
    /// Wall time of the whole run: building the world, running it, the stop and `finish()`.
    public var wallNanoseconds: UInt64 = 0
    /// CPU time of the running thread over the same span (below the wall time on a busy machine).
    public var cpuNanoseconds: UInt64 = 0
    /// Callbacks the simulation ran (its trace's entries): each read delivered, write completed,
    /// accept, connect answer, packet landing and timer firing is one.
    public var events = 0
    /// Messages that came back whole.
    public var messagesEchoed = 0
    /// Connections the clients made (first connects and reconnects).
    public var connects = 0
    /// Connections lost to a fault (reset), each followed by a reconnect.
    public var connectionsLost = 0
    /// Partitions between the server and a client host.
    public var partitions = 0
    /// Resets the network armed (drawn from the seed).
    public var resetsInjected = 0
    /// The trace's hash: one seed, one hash.
    public var traceHash = ""
    /// What `finish()` found left open, or another problem; empty for a clean run.
    public var problems: [String] = []

    /// Virtual time over wall time.
    public var speedUp: Double {
        let (seconds, attoseconds) = virtualTime.components
        let virtualNanoseconds = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
        return wallNanoseconds == 0 ? 0 : virtualNanoseconds / Double(wallNanoseconds)
    }

    /// Virtual time over the thread's CPU time.
    public var cpuSpeedUp: Double {
        cpuNanoseconds == 0 ? 0 : speedUp * Double(wallNanoseconds) / Double(cpuNanoseconds)
    }

    /// Wall nanoseconds per simulated event.
    public var nanosecondsPerEvent: Double { events == 0 ? 0 : Double(wallNanoseconds) / Double(events) }
}

/// Counters the clients share (their loops all run on the driving thread).
final class EchoTally: @unchecked Sendable {
    // Sendable: touched only on the simulation's driving thread, inside its loops' callbacks.
    var bytesEchoed = 0
    var connects = 0
    var connectionsLost = 0
}

/// The simulation speed benchmark's world: an echo server and `SimulatedEchoSize.clients` clients
/// on a seeded simulated network with faults.
///
/// Thread rule: `run` builds and drives the whole simulation on the calling thread.
public enum SimulatedEchoWorld {
    static let port = 7_000
    /// Wait before a client reconnects after losing its connection.
    static let backoff: Duration = .seconds(1)

    /// Runs the world from `seed` at `size`; with `eventLimit`, stops after that many callbacks
    /// (the Profile mode's fixed amount of work), else at the end of `size.virtualTime`.
    ///
    /// Thread rule: any thread; the whole simulation runs on it.
    public static func run(seed: UInt64, size: SimulatedEchoSize = SimulatedEchoSize(), eventLimit: Int? = nil) -> SimulatedEchoFigures {
        var figures = SimulatedEchoFigures()
        let begin = DispatchTime.now().uptimeNanoseconds
        let cpuBegin = threadCPUNanoseconds()
        var draws = SeededRandomNumberGenerator(seed: seed ^ 0x6A09_E667_F3BC_C908)
        let simulation = Simulation(seed: seed, loopName: "server")
        let hosts = (0..<max(1, size.hosts)).map { simulation.makeLoop(name: "client-\($0)") }
        let tally = EchoTally()
        var clients: [EchoClient] = []
        var server: (any Disposable)?
        do {
            try simulation.setNetworkFaults(SimulationNetworkFaults(
                latency: .milliseconds(1), jitter: .milliseconds(4), resetPerMille: 200,
                resetWithin: size.virtualTime / 2, shortReadPerMille: 100))
            // A partition between the server and a drawn client host every tenth of the run, up to 20 s long.
            let tenth = size.virtualTime / 10
            for index in 0..<10 {
                let at = tenth * index + .milliseconds(Int64(draws.next() % UInt64(max(1, tenth.milliseconds))))
                let host = hosts[Int(draws.next() % UInt64(hosts.count))]
                try simulation.inject(.partition("server", host.name, at: at, for: .milliseconds(Int64(1_000 + draws.next() % 19_000))))
                figures.partitions += 1
            }
            server = try simulation.perform {
                TCPServer.listen(port: port).subscribeNext { connection in
                    _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                }
            }
            let message = (0..<size.messageSize).map { UInt8(truncatingIfNeeded: $0) }
            for index in 0..<size.clients {
                let loop = hosts[index % hosts.count]
                let phase = Duration.milliseconds(Int64(draws.next() % UInt64(max(1, size.period.milliseconds))))
                let client = EchoClient(loop: loop, tally: tally, message: message, period: size.period, phase: phase)
                clients.append(client)
                try simulation.perform(on: loop) { client.connect() }
            }
            let ran = simulation.run(for: size.virtualTime, limit: eventLimit ?? .max)
            if eventLimit == nil, ran == 0 { figures.problems.append("nothing ran") }
            for client in clients { try simulation.perform(on: client.loop) { client.stop() } }
            try simulation.perform { server?.dispose() }
        } catch {
            figures.problems.append("the run could not be set up: \(error)")
        }
        let report = simulation.finish()
        if eventLimit == nil { figures.problems += report.problems }
        figures.wallNanoseconds = DispatchTime.now().uptimeNanoseconds - begin
        figures.cpuNanoseconds = threadCPUNanoseconds() - cpuBegin
        figures.virtualTime = .nanoseconds(Int64(clamping: simulation.now.nanoseconds))
        figures.events = simulation.trace.count
        figures.messagesEchoed = tally.bytesEchoed / max(1, size.messageSize)
        figures.connects = tally.connects
        figures.connectionsLost = tally.connectionsLost
        figures.resetsInjected = simulation.networkResetsInjected
        figures.traceHash = simulation.trace.hashHex
        return figures
    }
}

/// The calling thread's CPU time, in nanoseconds.
func threadCPUNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

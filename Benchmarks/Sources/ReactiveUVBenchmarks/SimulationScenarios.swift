import Foundation
import SimulationWorkload

enum SimulationScenarios {
    /// The speed the simulation runs at: 1,000 echo clients for a virtual hour under faults, on
    /// this one thread, against the issue's bound of 1,000 times real time. `scale` divides the
    /// virtual time (`--quick`: 6 virtual minutes), never the clients.
    static func speed(scale: Int) -> ScenarioResult {
        let size = SimulatedEchoSize(virtualTime: .seconds(3_600 / max(1, scale)))
        let figures = SimulatedEchoWorld.run(seed: 1, size: size)
        let virtualSeconds = Double(figures.virtualTime.components.seconds)
        let wallSeconds = Double(figures.wallNanoseconds) / 1e9
        let met = figures.speedUp >= 1_000 && figures.problems.isEmpty
        var notes = [
            "virtual time \(format(virtualSeconds)) s, wall time \(format(wallSeconds)) s: \(format(figures.speedUp))× real time "
                + "(CPU time \(format(Double(figures.cpuNanoseconds) / 1e9)) s: \(format(figures.cpuSpeedUp))×)",
            "\(figures.events) simulated I/O events (callbacks traced), \(format(figures.nanosecondsPerEvent)) ns per event",
            "\(figures.messagesEchoed) messages echoed, \(figures.connects) connects, \(figures.connectionsLost) lost and reconnected, "
                + "\(figures.resetsInjected) resets, \(figures.partitions) partitions; trace \(figures.traceHash)",
        ]
        notes += figures.problems.map { "PROBLEM: \($0)" }
        notes.append("target: ≥ 1000× real time — \(met ? "met" : "NOT met")")
        var result = ScenarioResult(
            name: "simulation speed",
            workload: "\(size.clients) echo clients, a \(size.messageSize)-byte message every \(size.period) each, for \(format(virtualSeconds)) virtual s, "
                + "seed 1: latency 1–5 ms, short reads, resets with reconnect, partitions; one thread",
            unit: "× real time", higherIsBetter: true, target: nil,
            measurements: [
                Measurement(Contender.ours, figures.speedUp,
                            detail: "\(figures.events) events, \(format(figures.nanosecondsPerEvent)) ns/event, \(format(wallSeconds)) s wall"),
            ])
        result.notes = notes
        return result
    }
}

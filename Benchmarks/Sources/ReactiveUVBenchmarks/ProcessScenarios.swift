import CBaselines
import Foundation
import ReactiveUV

enum ProcessScenarios {
    /// Spawn rate: start `/bin/true`, wait for its exit, `count` times one after another.
    ///
    /// The contenders run interleaved, `rounds` times each, and each reports its median
    /// round: a fork's cost swings with what else the machine runs.
    static func spawnRate(count: Int, rounds: Int) -> ScenarioResult {
        let file = "/bin/true"
        var times: [String: [Double]] = [:]
        for _ in 0..<rounds {
            let node = runNode("spawn.js", [String(count), file])
            let rounds: [(String, UInt64?)] = [
                (Contender.ours, ours(file: file, count: count)),
                (Contender.rawC, rawc_spawn_rate(file, Int32(count))),
                (Contender.node, node.flatMap { $0["failed"] == 0 ? $0["elapsed_ns"].map { UInt64($0) } : nil }),
            ]
            for (name, elapsed) in rounds {
                if let elapsed, elapsed > 0 { times[name, default: []].append(Double(elapsed)) }
            }
        }
        var measurements: [Measurement] = []
        for (name, detail) in [(Contender.ours, "ChildProcess.spawn"), (Contender.rawC, "uv_spawn"), (Contender.node, "child_process.spawn")] {
            guard let elapsed = times[name].map(median), elapsed > 0 else { continue }
            measurements.append(Measurement(name, Double(count) / (elapsed / 1e9),
                                            detail: "\(format(elapsed / Double(count) / 1000)) µs each (median of \(times[name]?.count ?? 0)); \(detail)"))
        }
        return ScenarioResult(
            name: "spawn rate",
            workload: "start \(file) with stdio ignored, wait for its exit, \(count) times one after another; \(rounds) interleaved rounds",
            unit: "spawns/s", higherIsBetter: true, target: (Contender.rawC, 0.9), measurements: measurements)
    }

    /// Ours: each spawn's completion (the child exited) starts the next, on the loop thread.
    static func ours(file: String, count: Int) -> UInt64? {
        let loop = ReactiveUV.EventLoop(name: "spawn")
        defer { loop.shutdown() }
        let finished = CondFlag()
        let elapsed = ResultBox<UInt64>()
        let chain = SpawnChain(file: file, count: count) { result in
            elapsed.value = result
            finished.signal()
        }
        loop.execute { chain.start() }
        finished.wait()
        return elapsed.value
    }
}

/// Spawns one child after another on the loop thread, `count` times.
final class SpawnChain: @unchecked Sendable {
    // Touched only on the loop's thread (after `start()` was queued there).
    private let file: String
    private var remaining: Int
    private var begin: UInt64 = 0
    private let done: (UInt64?) -> Void

    init(file: String, count: Int, done: @escaping (UInt64?) -> Void) {
        self.file = file
        self.remaining = count
        self.done = done
    }

    func start() {
        begin = nanoseconds()
        next()
    }

    private func next() {
        ChildProcess.spawn(file, standardInput: .ignore, standardOutput: .ignore, standardError: .ignore)
            .subscribe(error: { [self] _ in done(nil) }, completed: { [self] in
                remaining -= 1
                if remaining > 0 { next() } else { done(nanoseconds() - begin) }
            })
    }
}

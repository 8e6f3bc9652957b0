import ReactiveUV
import XCTest

extension Simulation {
    /// Runs `body` on a fresh simulation from `seed`, twice, and fails the test if the two traces
    /// differ (naming the first callback where they part), if `body` throws, or if either run left
    /// anything open (`finish()`'s leak check). Prints `simulation seed N trace HEX`.
    ///
    /// `body` gets the simulation, builds the program on its loops and runs it (`run(for:)`,
    /// `runUntilIdle()`); `finish()` follows each run. `file` and `line` place the failures.
    ///
    /// - Returns: The trace's hash (the first run's, if they diverged).
    ///
    /// Thread rule: call from the test's thread.
    @discardableResult
    public static func check(
        seed: UInt64,
        file: StaticString = #filePath,
        line: UInt = #line,
        _ body: (Simulation) throws -> Void
    ) -> UInt64 {
        let (first, second, problems) = replay(seed: seed, body)
        print("simulation seed \(seed) trace \(first.hashHex)")
        for problem in problems { XCTFail(problem, file: file, line: line) }
        if first.hash != second.hash {
            XCTFail("simulation seed \(seed) diverged: trace \(first.hashHex), then \(second.hashHex); "
                    + firstDifference(first.entries, second.entries), file: file, line: line)
        }
        return first.hash
    }

    /// Runs `body` twice from `seed`: both traces, and every problem (an error `body` threw, what
    /// `finish()` found).
    static func replay(seed: UInt64, _ body: (Simulation) throws -> Void)
        -> (first: SimulationTrace, second: SimulationTrace, problems: [String]) {
        var problems: [String] = []
        func once() -> SimulationTrace {
            let simulation = Simulation(seed: seed)
            do {
                try body(simulation)
            } catch {
                problems.append("simulation seed \(seed): \(error)")
            }
            problems += simulation.finish().problems.map { "simulation seed \(seed): \($0)" }
            return simulation.trace
        }
        let first = once()
        return (first, once(), problems)
    }

    static func firstDifference(_ first: [SimulationTraceEntry], _ second: [SimulationTraceEntry]) -> String {
        for index in 0..<min(first.count, second.count) where first[index] != second[index] {
            return "callback #\(index) was \(first[index]), then \(second[index])"
        }
        return "the runs had \(first.count) and \(second.count) callbacks"
    }
}

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
        verdict(seed: seed, replay(seed: seed, body), file: file, line: line)
    }

    /// `check(seed:file:line:_:)` on simulations made with `faultPlan`
    /// (`Simulation(seed:faultPlan:)`): both runs get the same planned faults. A plan the
    /// simulation refuses fails the test, naming the fault.
    ///
    /// - Returns: The trace's hash (the first run's, if they diverged).
    ///
    /// Thread rule: call from the test's thread.
    @discardableResult
    public static func check(
        seed: UInt64,
        faultPlan: [SimulationFault],
        file: StaticString = #filePath,
        line: UInt = #line,
        _ body: (Simulation) throws -> Void
    ) -> UInt64 {
        verdict(seed: seed, replay(seed: seed, faultPlan: faultPlan, body), file: file, line: line)
    }

    /// Runs `body` twice from `seed` (with `faultPlan`, if any): both traces, and every problem
    /// (a plan refused, an error `body` threw, what `finish()` found).
    static func replay(seed: UInt64, faultPlan: [SimulationFault]? = nil, _ body: (Simulation) throws -> Void)
        -> (first: SimulationTrace, second: SimulationTrace, problems: [String]) {
        var problems: [String] = []
        func once() -> SimulationTrace {
            let simulation: Simulation
            do {
                simulation = try faultPlan.map { plan throws(SimulationMisuse) in try Simulation(seed: seed, faultPlan: plan) }
                    ?? Simulation(seed: seed)
            } catch {
                problems.append("simulation seed \(seed): \(error)")
                return SimulationTrace()
            }
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

    /// Prints the seed and the first trace's hash, fails the test for each problem and for a
    /// divergence; returns the first trace's hash.
    private static func verdict(seed: UInt64, _ runs: (first: SimulationTrace, second: SimulationTrace, problems: [String]),
                                file: StaticString, line: UInt) -> UInt64 {
        let (first, second, problems) = runs
        print("simulation seed \(seed) trace \(first.hashHex)")
        for problem in problems { XCTFail(problem, file: file, line: line) }
        if first.hash != second.hash {
            XCTFail("simulation seed \(seed) diverged: trace \(first.hashHex), then \(second.hashHex); "
                    + firstDifference(first.entries, second.entries), file: file, line: line)
        }
        return first.hash
    }

    static func firstDifference(_ first: [SimulationTraceEntry], _ second: [SimulationTraceEntry]) -> String {
        for index in 0..<min(first.count, second.count) where first[index] != second[index] {
            return "callback #\(index) was \(first[index]), then \(second[index])"
        }
        return "the runs had \(first.count) and \(second.count) callbacks"
    }
}

import ReactiveUV
import XCTest

extension Simulation {
    /// `check(seed:file:line:_:)` for a test whose point is what `finish()` reports (a handle left
    /// open, a timer still pending, a misuse noted): runs `body` twice from `seed` (with
    /// `faultPlan`, if given) and fails the test if the traces differ, if `body` throws, or if the
    /// two runs report different problems; the problems are returned, not failed on. `body` may
    /// call `finish()` itself to look at the report (a second call returns the same report).
    ///
    /// - Returns: The first run's trace hash and the problems its `finish()` reported.
    ///
    /// Thread rule: call from the test's thread.
    @discardableResult
    public static func checkReportingProblems(
        seed: UInt64,
        faultPlan: [SimulationFault]? = nil,
        file: StaticString = #filePath,
        line: UInt = #line,
        _ body: (Simulation) throws -> Void
    ) -> (traceHash: UInt64, problems: [String]) {
        var reports: [[String]] = []
        func once() -> SimulationTrace {
            let simulation: Simulation
            do {
                simulation = try faultPlan.map { plan throws(SimulationMisuse) in try Simulation(seed: seed, faultPlan: plan) }
                    ?? Simulation(seed: seed)
            } catch {
                XCTFail("simulation seed \(seed): \(error)", file: file, line: line)
                reports.append([])
                return SimulationTrace()
            }
            do {
                try body(simulation)
            } catch {
                XCTFail("simulation seed \(seed): \(error)", file: file, line: line)
            }
            reports.append(simulation.finish().problems)
            return simulation.trace
        }
        let first = once()
        let second = once()
        print("simulation seed \(seed) trace \(first.hashHex)")
        if first.hash != second.hash {
            XCTFail("simulation seed \(seed) diverged: trace \(first.hashHex), then \(second.hashHex); "
                    + firstDifference(first.entries, second.entries), file: file, line: line)
        }
        if reports[0] != reports[1] {
            XCTFail("simulation seed \(seed): the runs reported \(reports[0]), then \(reports[1])", file: file, line: line)
        }
        return (first.hash, reports[0])
    }
}

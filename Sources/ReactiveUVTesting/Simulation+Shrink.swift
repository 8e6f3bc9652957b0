import ReactiveUV

extension Simulation {
    /// Cuts a failing run's fault list down to a minimal one that still fails, and prints it as
    /// Swift code to paste into a test (`Simulation(seed:faultPlan:)`).
    ///
    /// Each try runs `body` on a fresh `Simulation(seed: seed, faultPlan: candidate)`, then
    /// `finish()`; the run fails when `body` throws or `finish()` reports a problem. First whole
    /// halves of the list are removed, then quarters, down to one fault at a time, keeping each
    /// removal after which the run still fails, until no single fault can go. The seed stays:
    /// only the faults change.
    ///
    /// - Parameters:
    ///   - seed: The failing run's seed.
    ///   - faults: Its faults: `injectedFaults` of the failing run, or a written plan.
    ///   - print: Where the result goes (default: standard output).
    ///   - body: Builds and runs the program and throws when its check fails.
    /// - Returns: The minimal list (in the given order); `faults` unchanged when the run with
    ///   them does not fail (it says so).
    ///
    /// Thread rule: call from the test's thread; it drives every run.
    @discardableResult
    public static func shrink(
        seed: UInt64,
        faults: [SimulationFault],
        print: (String) -> Void = { Swift.print($0) },
        _ body: (Simulation) throws -> Void
    ) -> [SimulationFault] {
        var runs = 0
        func fails(_ plan: [SimulationFault]) -> Bool {
            runs += 1
            guard let simulation = try? Simulation(seed: seed, faultPlan: plan) else { return false }
            var failed = false
            do { try body(simulation) } catch { failed = true }
            if !simulation.finish().problems.isEmpty { failed = true }
            return failed
        }
        // A plan the simulation refuses is said as such, not taken for a run that passes (a part of a
        // valid plan is valid, so the runs below cannot be refused).
        do {
            _ = try Simulation(seed: seed, faultPlan: faults).finish()
        } catch {
            print("simulation seed \(seed): the fault plan is refused (\(error)); nothing to shrink")
            return faults
        }
        guard fails(faults) else {
            print("simulation seed \(seed): the run does not fail with these \(faults.count) fault(s); nothing to shrink")
            return faults
        }
        var current = faults
        var chunk = max(1, current.count / 2)
        while !current.isEmpty {
            var removed = false
            var start = 0
            while start < current.count {
                let candidate = Array(current[..<start] + current[min(start + chunk, current.count)...])
                if fails(candidate) {
                    current = candidate
                    removed = true
                } else {
                    start += chunk
                }
            }
            if chunk == 1 && !removed { break }
            chunk = max(1, min(chunk / 2, current.count / 2))
        }
        print("simulation seed \(seed): \(current.count) of \(faults.count) fault(s) still fail it (\(runs) runs):\n"
              + "let faults: [SimulationFault] = " + SimulationFault.swiftCode(current))
        return current
    }
}

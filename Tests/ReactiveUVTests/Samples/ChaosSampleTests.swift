import Foundation
import XCTest

/// The `chaos` sample run as a user runs it: the echo server and its clients on a simulated
/// network under seeded faults; one seed, one output.
final class ChaosSampleTests: XCTestCase {
    private func run(_ arguments: [String]) throws -> (status: Int32?, output: String, errors: String) {
        let sample = try SampleProcess("chaos", arguments)
        let status = sample.waitForExit()
        return (status, sample.standardOutput, sample.standardError)
    }

    private func line(_ prefix: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(prefix + " ") }.map { String($0.dropFirst(prefix.count + 1)) }
    }

    func testTheSameSeedPrintsTheSameOutputInTwoProcesses() throws {
        let first = try run(["--seed", "3", "--clients", "12"])
        let second = try run(["--seed", "3", "--clients", "12"])
        XCTAssertEqual(first.status, 0, first.output + first.errors)
        XCTAssertEqual(first.output, second.output)
        XCTAssertEqual(line("seed", in: first.output), "3")
        XCTAssertEqual(line("trace", in: first.output)?.count, 16, first.output)
        XCTAssertEqual(line("verdict", in: first.output), "ok")
        // Seed 3 draws a partition and a reset: the faults are printed as a plan to paste.
        XCTAssertTrue(first.output.contains(".partition(\"echo-"), first.output)
        XCTAssertTrue(first.output.contains(".reset(connection: "), first.output)
        XCTAssertEqual(first.errors, "")
    }

    func testDifferentSeedsPrintDifferentTraces() throws {
        let traces = try (1...4).map { seed in try line("trace", in: run(["--seed", "\(seed)"]).output) }
        XCTAssertFalse(traces.contains(nil), "\(traces)")
        XCTAssertEqual(Set(traces).count, 4, "\(traces)")
    }

    func testEveryClientGetsItsBytesBackOrAReportedErrorForSeveralSeeds() throws {
        var errorsReported = 0
        for seed in [3, 5, 11, 16, 17, 23] {
            let result = try run(["--seed", "\(seed)", "--clients", "20", "--virtual-seconds", "6"])
            XCTAssertEqual(result.status, 0, "seed \(seed): \(result.output)")
            XCTAssertEqual(line("verdict", in: result.output), "ok", "seed \(seed): \(result.output)")
            let counts = line("clients", in: result.output)?.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) } ?? []
            XCTAssertEqual(counts.count, 3, result.output)
            if counts.count == 3 {
                XCTAssertEqual(counts[1] + counts[2], 20, "every client ended one way or the other: \(result.output)")
                errorsReported += counts[2]
            }
        }
        XCTAssertGreaterThan(errorsReported, 0, "the seeds drew resets that cut some clients short")
    }

    func testBadArgumentsPrintUsageAndExitTwo() throws {
        let cases: [([String], String)] = [
            ([], "--seed is required"),
            (["--seed"], "--seed needs a value"),
            (["--seed", "-1"], "--seed needs a whole number"),
            (["--seed", "seven"], "--seed needs a whole number"),
            (["--seed", "1", "--clients", "0"], "--clients needs a whole number from 1 to 1000"),
            (["--seed", "1", "--virtual-seconds", "0"], "--virtual-seconds needs a number of seconds"),
            (["--seed", "1", "--bogus"], "unknown argument '--bogus'"),
        ]
        for (arguments, message) in cases {
            let result = try run(arguments)
            XCTAssertEqual(result.status, 2, "\(arguments)")
            XCTAssertTrue(result.errors.contains("chaos: " + message), "\(arguments): \(result.errors)")
            XCTAssertTrue(result.errors.contains("usage: chaos"), "\(arguments)")
            XCTAssertEqual(result.output, "", "\(arguments)")
        }
    }
}

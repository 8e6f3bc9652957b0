@testable import ReactiveUV
@testable import ReactiveUVTesting
import TailKit
import XCTest

/// The `tail -F` sample's own logic (`TailKit.follow`: the last lines, then the follower, its notices in
/// GNU tail's words) on a simulated loop, its output collected instead of written to standard output.
final class SimulatedTailTests: XCTestCase {
    /// Runs `signal` on the simulation's loop for a millisecond and checks that it completed.
    private func succeeds<Value>(_ signal: Signal<Value>, _ simulation: Simulation, line: UInt = #line) throws {
        let recorder = try simulation.record(signal)
        simulation.run(for: .milliseconds(1))
        XCTAssertEqual(recorder.terminal.map { "\($0)" }, "completed", "\(recorder.recorded)", line: line)
    }

    func testTailFollowsARotationDuringAPartialLineWithoutLosingOrRepeatingIt() throws {
        Simulation.check(seed: 92) { simulation in
            let loop = simulation.loop
            try succeeds(Files.createDirectory("/var/log", withParents: true), simulation)
            // The logger holds its file open and is in the middle of a line.
            let logger = try simulation.record(Files.open("/var/log/app.log", mode: .write, options: [.create, .append]))
            simulation.run(for: .milliseconds(1))
            let log = try XCTUnwrap(logger.values.first)
            try succeeds(log.append(Array("a\nb\nc\npart".utf8)), simulation)

            let printed = Locked<[UInt8]>([])
            let said = Locked<[String]>([])
            let outcome = Locked<String>("following")
            try simulation.perform {
                loop.task { _ in
                    let copier = Copier { bytes in
                        printed.withLock { $0 += bytes }
                        return Signal<Void>.empty
                    }
                    do {
                        try await follow("/var/log/app.log", lines: 2, interval: .seconds(1), copier, on: loop,
                                         until: Signal<Void>.timer(after: .seconds(5)), say: { line in said.withLock { $0.append(line) } })
                        outcome.withLock { $0 = "stopped after \(copier.bytesRead) bytes read" }
                    } catch {
                        outcome.withLock { $0 = "failed: \(error)" }
                    }
                }
            }
            simulation.run(for: .milliseconds(20))
            XCTAssertEqual(String(decoding: printed.current, as: UTF8.self), "c\npart", "the last 2 lines, the second still open")

            // Rotated in the middle of the line: the logger ends it in the old file; later a new file takes the name.
            try succeeds(Files.rename(from: "/var/log/app.log", to: "/var/log/app.log.1").then(log.append(Array("ial\n".utf8))),
                         simulation)
            simulation.run(for: .milliseconds(20))
            try succeeds(Files.write(Array("next\n".utf8), to: "/var/log/app.log"), simulation)
            simulation.run(for: .seconds(6))

            XCTAssertEqual(String(decoding: printed.current, as: UTF8.self), "c\npartial\nnext\n", "nothing lost, nothing twice")
            XCTAssertEqual(said.current, ["tail: '/var/log/app.log' has become inaccessible: No such file or directory",
                                          "tail: '/var/log/app.log' has appeared;  following new file"])
            XCTAssertTrue(outcome.current.hasPrefix("stopped after "), outcome.current)
        }
    }
}

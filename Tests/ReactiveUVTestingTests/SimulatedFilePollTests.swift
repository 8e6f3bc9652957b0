import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `FileWatch.poll` on a simulated loop: `stat` of the in-memory tree on a timer of the loop, each change
/// reported at the first poll after it, on virtual time.
final class SimulatedFilePollTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// Runs `signal` on the simulation's loop until the clock reaches its next step, and says whether it succeeded.
    private func succeeds<Value>(_ signal: Signal<Value>, _ simulation: Simulation, line: UInt = #line) throws {
        let recorder = try simulation.record(signal)
        simulation.run(for: .zero)
        XCTAssertEqual(recorder.terminal.map { "\($0)" }, "completed", line: line)
    }

    func testPollingReportsAGrowthAModeADeletionOnceAndARecreationAtThePollAfterEach() throws {
        Simulation.check(seed: 101) { simulation in
            try succeeds(Files.write([1], to: "/p.txt"), simulation)
            let poll = try simulation.record(FileWatch.poll(at: "/p.txt", interval: .milliseconds(20)))
            simulation.run(for: .milliseconds(10))
            try succeeds(Files.write([1, 2], to: "/p.txt"), simulation)
            simulation.run(for: .milliseconds(30))
            try succeeds(Files.chmod("/p.txt", 0o600), simulation)
            simulation.run(for: .milliseconds(30))
            try succeeds(Files.remove("/p.txt"), simulation)
            simulation.run(for: .milliseconds(40))
            try succeeds(Files.write(Array("abcdef".utf8), to: "/p.txt"), simulation)
            simulation.run(for: .milliseconds(20))

            XCTAssertEqual(poll.recorded.map(\.time), [ms(20), ms(60), ms(80), ms(120)],
                           "each change at the next poll; the deletion once, not at every poll while gone")
            let changes = poll.values
            XCTAssertEqual(changes.count, 4)
            XCTAssertEqual(changes.first?.previous?.size, 1, "the first change starts from the status found at subscription")
            XCTAssertEqual(changes.first?.current?.size, 2)
            XCTAssertEqual(changes.dropFirst().first?.current.map { $0.mode & 0o777 }, 0o600)
            XCTAssertEqual(changes.dropFirst(2).first?.previous?.size, 2)
            XCTAssertNil(changes.dropFirst(2).first?.current)
            XCTAssertNil(changes.last?.previous)
            XCTAssertEqual(changes.last?.current?.size, 6)
            XCTAssertNil(poll.terminal)
        }
    }

    func testAMissingPathIsENOENTAnUnreachableOneEndsWithEACCESAndShutdownEndsAPoll() throws {
        Simulation.check(seed: 102) { simulation in
            let missing = try simulation.record(FileWatch.poll(at: "/nope", interval: .milliseconds(10)))
            simulation.run(for: .zero)
            XCTAssertEqual(missing.terminal?.error as? UVError, .noSuchFile)
            XCTAssertEqual((missing.terminal?.error as? UVError)?.context, "stat /nope")

            try succeeds(Files.createDirectory("/d"), simulation)
            try succeeds(Files.write([1], to: "/d/f"), simulation)
            let poll = try simulation.record(FileWatch.poll(at: "/d/f", interval: .microseconds(1_500)))
            try succeeds(Files.chmod("/d", 0o600), simulation)
            simulation.run(for: .milliseconds(5))
            XCTAssertEqual(poll.values, [])
            XCTAssertEqual(poll.terminal?.error as? UVError, .permissionDenied)
            XCTAssertEqual(poll.recorded.map(\.time), [ms(2)], "1.5 ms rounds up to whole milliseconds, as libuv counts")

            let other = simulation.makeLoop(name: "other")
            try succeeds(Files.chmod("/d", 0o700), simulation)
            let ended = try simulation.record(FileWatch.poll(at: "/d/f", interval: .milliseconds(10)), on: other)
            simulation.run(for: .milliseconds(25))
            _ = try other.tryShutdown()
            guard case .shutDown(let name)? = ended.terminal?.error as? EventLoopError else {
                return XCTFail("expected shutDown, got \(String(describing: ended.terminal))")
            }
            XCTAssertEqual(name, "other")
        }
    }
}

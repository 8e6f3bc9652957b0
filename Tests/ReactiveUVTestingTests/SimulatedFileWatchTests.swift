import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `FileWatch.changes` of a file, a watched directory that goes away, and the watch overflow fault on a
/// simulated loop: the events the real (inotify) watch sends, on virtual time.
final class SimulatedFileWatchTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// Runs `signal` on the simulation's loop until idle and says whether it succeeded.
    private func succeeds<Value>(_ signal: Signal<Value>, _ simulation: Simulation, line: UInt = #line) throws {
        let recorder = try simulation.record(signal)
        simulation.runUntilIdle()
        XCTAssertEqual(recorder.terminal.map { "\($0)" }, "completed", line: line)
    }

    func testAFileWatchFollowsItsNameAcrossARotationAndEndsWhenNoFileTakesIt() throws {
        Simulation.check(seed: 71) { simulation in
            try succeeds(Files.createDirectory("/logs"), simulation)
            try succeeds(Files.write(Array("a\n".utf8), to: "/logs/app.log"), simulation)
            let events = try simulation.record(FileWatch.changes(at: "/logs/app.log"))
            simulation.run(for: .milliseconds(1))
            try succeeds(Files.write(Array("b\n".utf8), to: "/logs/app.log", append: true), simulation)
            try succeeds(Files.chmod("/logs/app.log", 0o600), simulation)
            try succeeds(Files.write([1], to: "/logs/other"), simulation)
            // The rotation: renamed away, a new file under the name; the new one is followed.
            try succeeds(Files.rename(from: "/logs/app.log", to: "/logs/app.log.1").then(Files.write(Array("c\n".utf8), to: "/logs/app.log")),
                         simulation)
            try succeeds(Files.write(Array("late\n".utf8), to: "/logs/app.log.1", append: true), simulation)
            try succeeds(Files.write(Array("d\n".utf8), to: "/logs/app.log", append: true), simulation)
            XCTAssertEqual(events.values.map(\.description), ["changed app.log", "changed app.log", "renamed app.log",
                                                              "renamed app.log", "changed app.log"],
                           "written, chmod, gone, a new file took the name (the old file's write is not about the name)")
            XCTAssertEqual(events.values.first?.path, "/logs/app.log")
            XCTAssertNil(events.terminal, "a replacement within the grace period keeps the watch")

            // Deleted, and no file takes the name within 100 ms (virtual): the real watch's ENOENT.
            try succeeds(Files.remove("/logs/app.log"), simulation)
            XCTAssertEqual(events.values.last?.description, "renamed app.log")
            let error = events.terminal?.error as? UVError
            XCTAssertEqual(error, .noSuchFile)
            XCTAssertEqual(error?.message, "the watched file was deleted or moved away and no file took its name within 0.1 seconds")
            XCTAssertEqual(events.recorded.last?.time, ms(101), "the grace period ran on virtual time")
        }
    }

    func testAFileReplacedByADirectoryEndsTheWatchWithEISDIR() throws {
        Simulation.check(seed: 72) { simulation in
            try succeeds(Files.write([1], to: "/f"), simulation)
            let events = try simulation.record(FileWatch.changes(at: "/f"))
            // Within the grace period; whether the watch looks at the name between the two is the seed's pick.
            try succeeds(Files.remove("/f").then(Files.createDirectory("/f")), simulation)
            XCTAssertTrue(events.values.allSatisfy { $0.description == "renamed f" }, "\(events.values)")
            XCTAssertEqual(events.terminal?.error as? UVError, .isDirectory)
            XCTAssertEqual((events.terminal?.error as? UVError)?.message, "the watched file was replaced by a directory")
        }
    }

    func testADirectoryWatchSeesItsOwnChangesAndEndsWhenTheDirectoryGoes() throws {
        Simulation.check(seed: 73) { simulation in
            try succeeds(Files.createDirectory("/w"), simulation)
            let events = try simulation.record(FileWatch.changes(at: "/w"))
            try succeeds(Files.chmod("/w", 0o700), simulation)
            try succeeds(Files.rename(from: "/w", to: "/v"), simulation)
            XCTAssertEqual(events.values.map(\.description), ["changed ."])
            let error = events.terminal?.error as? UVError
            XCTAssertEqual(error, .noSuchFile)
            XCTAssertEqual(error?.message, "the watched path was deleted or moved away")
        }
    }

    func testRemovingATreeEndsTheWatchesInsideItAndLeavesItsOpenFilesReadable() throws {
        Simulation.check(seed: 76) { simulation in
            try succeeds(Files.createDirectory("/a/b", withParents: true), simulation)
            try succeeds(Files.write(Array("x".utf8), to: "/a/b/f"), simulation)
            let inner = try simulation.record(FileWatch.changes(at: "/a/b"))
            let opening = try simulation.record(Files.open("/a/b/f"))
            simulation.runUntilIdle()
            let file = try XCTUnwrap(opening.values.first)
            try succeeds(Files.removeTree("/a"), simulation)
            XCTAssertEqual(inner.terminal?.error as? UVError, .noSuchFile, "\(inner.recorded)")
            let info = try simulation.record(file.stat())
            let bytes = try simulation.record(file.read(at: 0, count: 4))
            simulation.runUntilIdle()
            XCTAssertEqual(info.values.first?.linkCount, 0)
            XCTAssertEqual(bytes.values, [Array("x".utf8)])
        }
    }

    func testAWatchOverflowLosesAnEventAndSaysSoThenWatchingGoesOn() throws {
        let plan: [SimulationFault] = [.watchOverflow(path: "/w", at: .milliseconds(5)), .watchOverflow(path: "/w/f", at: .zero)]
        Simulation.check(seed: 74, faultPlan: plan) { simulation in
            try succeeds(Files.createDirectory("/w"), simulation)
            try succeeds(Files.write([1], to: "/w/f"), simulation)
            let directory = try simulation.record(FileWatch.changes(at: "/w"))
            let file = try simulation.record(FileWatch.changes(at: "/w/f"))
            try succeeds(Files.write([2], to: "/w/a"), simulation)
            simulation.run(for: .milliseconds(5))
            try succeeds(Files.write([3], to: "/w/b"), simulation)
            try succeeds(Files.write([4], to: "/w/c"), simulation)
            try succeeds(Files.write([5], to: "/w/f", append: true), simulation)
            try succeeds(Files.write([6], to: "/w/f", append: true), simulation)
            XCTAssertEqual(directory.values.map(\.description),
                           ["renamed a", "changed a", "eventsLost .", "changed b", "renamed c", "changed c", "changed f", "changed f"],
                           "the event at 5 ms (b made) is lost, the notice in its place; then every change")
            XCTAssertEqual(directory.values[2].path, "/w")
            XCTAssertEqual(file.values.map(\.description), ["eventsLost f", "changed f"], "the file's first write is lost")
            XCTAssertNil(directory.terminal)
            XCTAssertNil(file.terminal)
            XCTAssertEqual(simulation.injectedFaults, [plan[1], plan[0]], "by time")
            XCTAssertEqual("\(plan[0])", #".watchOverflow(path: "/w", at: .milliseconds(5))"#)
        }
        XCTAssertThrowsError(try Simulation(seed: 1, faultPlan: [.watchOverflow(path: "", at: .zero)])) { error in
            XCTAssertTrue("\(error)".contains("a file fault needs a path"), "\(error)")
        }
    }

    func testWatchOverflowsDrawnFromTheSeedReplayAsAPlan() throws {
        let program = Signal<Int>.interval(.milliseconds(10)).take(30).flatMap(maxConcurrent: 1) { index in
            Files.write([UInt8(index)], to: "/w/f\(index % 4)").then(Signal<Int>.empty)
        }
        func run(_ simulation: Simulation) throws -> [String] {
            try succeeds(Files.createDirectory("/w"), simulation)
            let events = try simulation.record(FileWatch.changes(at: "/w"))
            _ = try simulation.record(program)
            simulation.runUntilIdle()
            return events.values.map(\.description)
        }
        var seen: [String] = []
        var injected: [SimulationFault] = []
        let seededHash = Simulation.check(seed: 75) { simulation in
            try simulation.setFileFaults(SimulationFileFaults(watchOverflowPerMille: 150))
            seen = try run(simulation)
            let lost = seen.filter { $0 == "eventsLost ." }.count
            XCTAssertGreaterThan(lost, 0, "at 150 in a thousand, some of the 60 events are lost")
            XCTAssertEqual(seen.count, 34, "4 files made (2 events each) and 26 rewritten; each lost event replaced by one notice: \(seen)")
            injected = simulation.injectedFaults
            XCTAssertEqual(injected.count, lost)
        }

        let replayHash = Simulation.check(seed: 75, faultPlan: injected) { replay in
            XCTAssertEqual(try run(replay), seen)
        }
        XCTAssertEqual(replayHash, seededHash)
        XCTAssertThrowsError(try Simulation(seed: 1).setFileFaults(SimulationFileFaults(watchOverflowPerMille: -1)))
    }
}

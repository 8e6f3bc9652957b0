import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `FileWatch.followEvents` (what the `tail -F` sample prints) on a simulated loop: rotations,
/// truncation and deletion on the in-memory tree, on virtual time, one trace per seed.
final class SimulatedFollowTests: XCTestCase {
    /// Runs `signal` on the simulation's loop until it ends (nothing else may be left running).
    private func succeeds<Value>(_ signal: Signal<Value>, _ simulation: Simulation, line: UInt = #line) throws -> [Value] {
        let recorder = try simulation.record(signal)
        simulation.run(for: .milliseconds(1))
        XCTAssertEqual(recorder.terminal.map { "\($0)" }, "completed", "\(recorder.recorded)", line: line)
        return recorder.values
    }

    /// The text of the bytes the follower sent, and its notices in short.
    private func transcript(_ events: [FileFollow.Event]) -> (text: String, notices: [String]) {
        var text: [UInt8] = []
        var notices: [String] = []
        for event in events {
            switch event {
            case .bytes(let bytes): text += bytes
            case .notice(.following): notices.append("following")
            case .notice(let notice): notices.append("\(notice)")
            }
        }
        return (String(decoding: text, as: UTF8.self), notices)
    }

    func testARotationDuringAPartialLineLosesAndRepeatsNothing() throws {
        Simulation.check(seed: 81) { simulation in
            _ = try succeeds(Files.createDirectory("/var/log", withParents: true), simulation)
            // The writer holds its file open, as a logger does, and writes a line in two pieces.
            let writer = try simulation.record(Files.open("/var/log/app.log", mode: .write, options: [.create, .append]))
            simulation.run(for: .milliseconds(1))
            let file = try XCTUnwrap(writer.values.first)
            _ = try succeeds(file.append(Array("one\ntw".utf8)), simulation)

            let follower = try simulation.record(FileWatch.followEvents(at: "/var/log/app.log", from: .beginning, chunkSize: 4))
            let lines = try simulation.record(FileWatch.follow(at: "/var/log/app.log", from: .beginning).lines())
            simulation.run(for: .milliseconds(20))
            XCTAssertEqual(transcript(follower.values).text, "one\ntw", "the partial line is sent as it stands")
            XCTAssertEqual(lines.values.count, 1, "only the complete line")

            // Rotated mid-line: renamed away; the writer ends its line in the old file, then a new file takes the name.
            _ = try succeeds(Files.rename(from: "/var/log/app.log", to: "/var/log/app.log.1").then(file.append(Array("o\n".utf8))),
                             simulation)
            simulation.run(for: .milliseconds(20))
            _ = try succeeds(Files.write(Array("three\n".utf8), to: "/var/log/app.log"), simulation)
            simulation.run(for: .seconds(2))

            let seen = transcript(follower.values)
            XCTAssertEqual(seen.text, "one\ntwo\nthree\n", "the old file read to its end, then the new one from its start")
            XCTAssertEqual(seen.notices, ["following", "missing", "following"])
            XCTAssertEqual(lines.values.map { String(decoding: $0, as: UTF8.self) }, ["one", "two", "three"])
            XCTAssertNil(follower.terminal)
        }
    }

    func testTruncationAndDeletionAreNoticedAndTheFollowerWaitsForTheName() throws {
        Simulation.check(seed: 82) { simulation in
            _ = try succeeds(Files.write(Array("abc\n".utf8), to: "/app.log"), simulation)
            let follower = try simulation.record(FileWatch.followEvents(at: "/app.log", from: .end, interval: .milliseconds(500)))
            simulation.run(for: .milliseconds(10))
            _ = try succeeds(Files.write(Array("abcdef\n".utf8), to: "/app.log"), simulation)
            simulation.run(for: .milliseconds(10))
            // copytruncate: emptied in place, then written shorter than what was read.
            _ = try succeeds(Files.write(Array("x\n".utf8), to: "/app.log"), simulation)
            simulation.run(for: .milliseconds(10))
            _ = try succeeds(Files.remove("/app.log"), simulation)
            simulation.run(for: .seconds(2))
            _ = try succeeds(Files.write(Array("back\n".utf8), to: "/app.log"), simulation)
            simulation.run(for: .seconds(1))
            let seen = transcript(follower.values)
            XCTAssertEqual(seen.text, "ef\nx\nback\n", "from the end at the start (offset 4); again from 0 after each change of file")
            XCTAssertEqual(seen.notices, ["following", "truncated", "missing", "following"])
            XCTAssertNil(follower.terminal, "a missing name is waited out")
        }
    }
}

import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `RunningChild.output`: a spawned child's standard output and error merged in arrival order.
final class ChildOutputTests: XCTestCase {
    /// A shell writes to its two streams in turn, waiting for a line on its standard input between
    /// writes (so each write is read before the next is made: the order is deterministic). `output`
    /// sends the four chunks in that order, stays open after standard output's EOF while standard
    /// error is still open, and completes once both reached EOF.
    func testOutputInterleavesBothStreamsInArrivalOrderAndCompletesAtTheSecondEOF() throws {
        try checked { harness in
            let script = "printf out1; read a; printf err1 >&2; read b; printf out2; exec 1>&-; read c; printf err2 >&2"
            let spawn = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", script]))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let input = try XCTUnwrap(child.standardInput)
            let output = try harness.record(child.output)
            let exit = try harness.record(child.exit)

            XCTAssertEqual(try output.waitForValues(1), [.standardOutput(Array("out1".utf8))])
            input.send(Array("\n".utf8))
            XCTAssertEqual(try output.waitForValues(2).last, .standardError(Array("err1".utf8)))
            input.send(Array("\n".utf8))
            XCTAssertEqual(try output.waitForValues(3).last, .standardOutput(Array("out2".utf8)))

            // The session closes an output pipe once its EOF was read (after its reader heard of it).
            try harness.wait(for: "the standard output pipe to reach EOF and close") {
                (try? harness.loop.openHandles())?.contains { $0.label?.contains("standard output of") == true } == false
            }
            XCTAssertFalse(output.events.contains { $0.isTerminating }, "completed at the first EOF: \(output.events)")

            input.send(Array("\n".utf8))
            input.close()
            XCTAssertTrue(try output.waitForTermination().isCompleted)
            XCTAssertEqual(output.values, [.standardOutput(Array("out1".utf8)), .standardError(Array("err1".utf8)),
                                           .standardOutput(Array("out2".utf8)), .standardError(Array("err2".utf8))])
            XCTAssertTrue(try exit.waitForTermination().isCompleted)
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: 0)])
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    /// A consumer's pause reaches both pipes: libuv stops reading each (its handle goes inactive), and
    /// a resume starts both again.
    func testAPausedConsumerPausesBothPipes() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", "read a; echo out; echo err >&2"]))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let events = Locked<[ProcessOutput]>([])
            let completed = Locked(false)
            let subscription = try harness.onLoop {
                UncheckedBox(child.output.subscribe(next: { value in events.withLock { $0.append(value) } },
                                                    completed: { completed.withLock { $0 = true } }))
            }.value
            defer { subscription.dispose() }
            func outputPipesActive() throws -> [Bool] {
                try harness.loop.openHandles().filter { handle in
                    ["standard output of", "standard error of"].contains { handle.label?.contains($0) == true }
                }.map(\.isActive)
            }
            XCTAssertEqual(try outputPipesActive(), [true, true], "both pipes are read")
            let control = try XCTUnwrap(try harness.onLoop { UncheckedBox((subscription as? Subscription)?.flowControl) }.value)
            try harness.onLoop { control.pause() }
            XCTAssertEqual(try outputPipesActive(), [false, false], "a paused consumer stops both readings")
            try harness.onLoop { control.resume() }
            XCTAssertEqual(try outputPipesActive(), [true, true])

            let input = try XCTUnwrap(child.standardInput)
            input.send(Array("\n".utf8))
            input.close()
            try harness.wait(for: "both pipes' EOF") { completed.withLock { $0 } }
            XCTAssertEqual(events.withLock { $0 }, [.standardOutput(Array("out\n".utf8)), .standardError(Array("err\n".utf8))])
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    /// A child whose standard error (or both output streams) is not a `.pipe`: `EINVAL` at once, naming
    /// the stream and how it was spawned; the pipe there is left unread for its own `bytes`.
    func testOutputOfAStreamThatIsNotAPipeIsEINVALNamingIt() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", "echo out"],
                                                              standardInput: .ignore, standardError: .ignore))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let output = try harness.record(child.output)
            let error = try XCTUnwrap(try output.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EINVAL")
            XCTAssertTrue(error.message.contains("standard error is not a pipe (spawned with standardError: .ignore)"), error.description)
            XCTAssertTrue(error.description.contains("RunningChild.output of /bin/sh (pid \(child.pid))"), error.description)
            let bytes = try harness.record(try XCTUnwrap(child.standardOutput).bytes)
            XCTAssertTrue(try bytes.waitForTermination().isCompleted)
            XCTAssertEqual(received(bytes), Array("out\n".utf8))
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)

            let neither = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", "exit 0"], standardInput: .ignore,
                                                                standardOutput: .ignore, standardError: .inherit))
            let quiet = try XCTUnwrap(try neither.waitForValues(1).first)
            let both = try XCTUnwrap(try harness.record(quiet.output).waitForTermination().error as? UVError)
            XCTAssertEqual(both.name, "EINVAL")
            XCTAssertTrue(both.message.contains("standard output and standard error are not pipes "
                                                + "(spawned with standardOutput: .ignore, standardError: .inherit)"), both.description)
            XCTAssertTrue(try neither.waitForTermination().isCompleted)
        }
    }

    /// `output` while standard error's `bytes` already has a reader: `EBUSY`, and the standard output
    /// reading it had started is let go, so standard output can still be read on its own.
    func testOutputWhileAPipeHasAReaderIsEBUSYAndLetsTheOtherPipeGo() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", "read a; echo out; echo err >&2"]))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let errors = try harness.record(try XCTUnwrap(child.standardError).bytes)
            let output = try harness.record(child.output)
            let error = try XCTUnwrap(try output.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EBUSY")
            XCTAssertTrue(error.description.contains("standard error of /bin/sh"), error.description)

            let bytes = try harness.record(try XCTUnwrap(child.standardOutput).bytes)
            let input = try XCTUnwrap(child.standardInput)
            input.send(Array("\n".utf8))
            input.close()
            XCTAssertTrue(try bytes.waitForTermination().isCompleted)
            XCTAssertEqual(received(bytes), Array("out\n".utf8))
            XCTAssertTrue(try errors.waitForTermination().isCompleted)
            XCTAssertEqual(received(errors), Array("err\n".utf8))
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(timeout: .seconds(30), body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

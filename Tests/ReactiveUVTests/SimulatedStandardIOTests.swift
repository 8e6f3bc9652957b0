@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `StandardIO` on a simulation: scripted standard input read on virtual time, standard output
/// and error captured with their times.
final class SimulatedStandardIOTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testScriptedInputArrivesAtItsTimesThenEnds() throws {
        Simulation.check(seed: 131) { simulation in
            try simulation.writeStandardInput("one\n", at: .milliseconds(10))
            try simulation.writeStandardInput("two\nthr", at: .milliseconds(20))
            try simulation.writeStandardInput("ee\n", at: .milliseconds(20))
            try simulation.closeStandardInput(at: .milliseconds(30))
            let lines = try simulation.record(StandardIO.input().lines().map { String(decoding: $0, as: UTF8.self) })
            simulation.runUntilIdle()
            XCTAssertEqual(lines.values, ["one", "two", "three"])
            XCTAssertEqual(lines.recorded.map(\.time), [ms(10), ms(20), ms(20), ms(30)])
            guard case .completed? = lines.terminal else { return XCTFail("\(lines.recorded)") }
        }
    }

    func testOneReaderAtATimeAndWhatAReaderLeftStaysForTheNext() throws {
        Simulation.check(seed: 132) { simulation in
            try simulation.writeStandardInput([1, 2], at: .milliseconds(5))
            try simulation.writeStandardInput([3], at: .milliseconds(15))
            try simulation.closeStandardInput(at: .milliseconds(40))
            let first = try simulation.record(StandardIO.input())
            let second = try simulation.record(StandardIO.input())
            simulation.run(for: .milliseconds(10))
            XCTAssertEqual(first.values, [[1, 2]])
            XCTAssertEqual((second.terminal?.error as? UVError)?.code, UVError(code: -EBUSY).code)
            first.dispose()
            simulation.run(for: .milliseconds(10))
            let third = try simulation.record(StandardIO.input())
            simulation.runUntilIdle()
            XCTAssertEqual(third.values, [[3]], "the byte that arrived at 15 ms, unread by the first reader")
            XCTAssertEqual(third.recorded.map(\.time), [ms(20), ms(40)])
            let late = try simulation.record(StandardIO.input())
            simulation.runUntilIdle()
            XCTAssertEqual(late.recorded.count, 1)
            guard case .completed? = late.terminal else { return XCTFail("input ended: \(late.recorded)") }
        }
    }

    func testABigScriptedWriteIsReadInChunksOfAtMost64KiB() throws {
        Simulation.check(seed: 133) { simulation in
            let big = [UInt8](repeating: 9, count: 150_000)
            try simulation.writeStandardInput(big, at: .zero)
            try simulation.closeStandardInput(at: .zero)
            let chunks = try simulation.record(StandardIO.input())
            simulation.runUntilIdle()
            XCTAssertEqual(chunks.values.map(\.count), [65_536, 65_536, 18_928])
        }
    }

    func testOutputAndErrorAreCapturedWithTheirTimesAndTraced() throws {
        func program(_ text: String) -> (Simulation) throws -> Void {
            { simulation in
                try simulation.perform {
                    StandardIO.output.send("hello ")
                    _ = simulation.loop.schedule(after: .milliseconds(3)) {
                        StandardIO.output.write(text)
                        StandardIO.error.send("oops\n")
                    }
                }
                simulation.runUntilIdle()
                XCTAssertEqual(simulation.standardOutput.map(\.text), ["hello ", text])
                XCTAssertEqual(simulation.standardOutput.map(\.time), [self.ms(0), self.ms(3)])
                XCTAssertEqual(simulation.standardOutputText, "hello " + text)
                XCTAssertEqual(simulation.standardError.map(\.loopName), ["sim"])
                XCTAssertEqual(simulation.standardErrorText, "oops\n")
            }
        }
        let world = Simulation.check(seed: 134, program("world\n"))
        let moon = Simulation.check(seed: 134, program("moon\n"))
        XCTAssertNotEqual(world, moon, "what is written is in the trace")
    }

    func testAWriterOfASimulationIsItsOwnAndClosesLikeAnyWriter() throws {
        Simulation.check(seed: 135) { simulation in
            let closed = try simulation.record(try simulation.perform { () -> Signal<Void> in
                let writer = StandardIO.output
                XCTAssertTrue(writer === StandardIO.output(on: simulation.loop))
                XCTAssertFalse(writer === StandardIO.output(on: EventLoop.shared), "the real process's writer is another")
                writer.send("a")
                return writer.close()
            })
            let after = try simulation.record(try simulation.perform { StandardIO.output.write("b") })
            simulation.runUntilIdle()
            guard case .completed? = closed.terminal, case .completed? = after.terminal else {
                return XCTFail("\(closed.recorded) \(after.recorded)")
            }
            XCTAssertEqual(simulation.standardOutputText, "ab", "a closed writer is replaced by a new one")
        }
    }

    func testBadScriptsAreRefused() throws {
        Simulation.check(seed: 136) { simulation in
            XCTAssertThrowsError(try simulation.writeStandardInput("x", at: .milliseconds(-1)))
            XCTAssertThrowsError(try simulation.closeStandardInput(at: .milliseconds(-1)))
            try simulation.writeStandardInput("x", at: .milliseconds(20))
            XCTAssertThrowsError(try simulation.closeStandardInput(at: .milliseconds(10))) { error in
                XCTAssertTrue("\(error)".contains("after the end"), "\(error)")
            }
            try simulation.closeStandardInput(at: .milliseconds(30))
            XCTAssertThrowsError(try simulation.writeStandardInput("y", at: .milliseconds(31))) { error in
                XCTAssertTrue("\(error)".contains("ends at"), "\(error)")
            }
            XCTAssertThrowsError(try simulation.closeStandardInput(at: .milliseconds(40)))
        }
    }

    func testAChildInheritingStandardInputReadsTheScript() throws {
        Simulation.check(seed: 137) { simulation in
            try simulation.addProgram("/bin/cat") { child in
                child.lifetime.add(child.standardInput.subscribe(next: { child.write($0) }, completed: { child.exit(status: 0) }))
            }
            try simulation.writeStandardInput("typed\n", at: .milliseconds(8))
            try simulation.closeStandardInput(at: .milliseconds(9))
            let run = try simulation.record(ChildProcess.spawn("/bin/cat", standardInput: .inherit, standardOutput: .inherit)
                .flatMap { $0.exit })
            simulation.runUntilIdle()
            XCTAssertEqual(run.values, [ProcessExit(status: 0, signal: 0)])
            XCTAssertEqual(simulation.standardOutput.map(\.text), ["typed\n"])
            XCTAssertEqual(simulation.standardOutput.map(\.time), [ms(8)])
        }
    }

    func testAReaderThatGoesAwayFailsLaterWritesWithEPIPE() throws {
        Simulation.check(seed: 138) { simulation in
            try simulation.closeStandardOutput(at: .milliseconds(15))
            let writes = try simulation.record(Signal<Int>.interval(.milliseconds(10)).take(3).flatMap { tick in
                StandardIO.output.write("tick \(tick)\n").then(Signal.return(tick))
            })
            try simulation.addProgram("/usr/bin/yes") { child in
                child.lifetime.add(Signal<Int>.interval(.milliseconds(10), on: child.loop).subscribeNext { _ in child.write("y\n") })
            }
            let child = try simulation.record(ChildProcess.spawn("/usr/bin/yes", standardOutput: .inherit).flatMap { $0.exit })
            simulation.runUntilIdle()
            XCTAssertEqual(writes.values, [0])
            XCTAssertEqual((writes.terminal?.error as? UVError)?.code, UVError(code: -EPIPE).code)
            XCTAssertEqual(writes.recorded.last?.time, ms(20))
            XCTAssertEqual(child.values, [ProcessExit(status: 0, signal: SIGPIPE)])
            XCTAssertEqual(simulation.standardOutputText, "tick 0\ny\n")
            XCTAssertThrowsError(try simulation.closeStandardError(at: .milliseconds(-1)))
        }
    }
}

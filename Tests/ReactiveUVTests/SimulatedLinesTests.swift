import LinesKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// The `lines` sample's own loop (`LinesKit.numberLines`) on a simulation: scripted standard input,
/// captured standard output, and a reader of the output that goes away, on virtual time.
final class SimulatedLinesTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// Starts the sample in a task on the simulation's loop; the outcome is "status N at T ms" once it ended.
    private func startLines(_ simulation: Simulation, said: Locked<[String]>, outcome: Locked<String>) throws {
        let loop = simulation.loop
        try simulation.perform {
            loop.task { _ in
                let status = await numberLines(repeating: nil, prompt: "", stats: false, on: loop) { line in
                    said.withLock { $0.append(line) }
                }
                outcome.withLock { $0 = "status \(status) at \(loop.now.nanoseconds / 1_000_000) ms" }
            }
        }
    }

    func testLinesFromScriptedStandardInputAreNumberedAsTheyArriveAndTheSampleEndsWithTheInput() throws {
        Simulation.check(seed: 141) { simulation in
            try simulation.writeStandardInput("alpha\r\nbe", at: .milliseconds(10))
            try simulation.writeStandardInput("ta\r", at: .milliseconds(25))
            try simulation.writeStandardInput("\ngam", at: .milliseconds(40))
            try simulation.closeStandardInput(at: .milliseconds(50))
            let said = Locked<[String]>([])
            let outcome = Locked<String>("running")
            try startLines(simulation, said: said, outcome: outcome)
            simulation.runUntilIdle()

            XCTAssertEqual(simulation.standardOutputText, "1: alpha\n2: beta\n3: gam\n",
                           "CRLF across chunks, and a last line without LF numbered at the end of input")
            let written = simulation.standardOutput.filter { !$0.bytes.isEmpty }
            XCTAssertEqual(written.map(\.text), ["1: alpha\n", "2: be", "ta", "\n", "3: gam", "\n"],
                           "each piece written as its chunk arrives, no line held whole")
            XCTAssertEqual(written.map(\.time), [ms(10), ms(10), ms(25), ms(40), ms(40), ms(50)])
            XCTAssertEqual(outcome.current, "status 0 at 50 ms")
            XCTAssertEqual(said.current, [])
        }
    }

    func testAReaderThatGoesAwayEndsTheSampleCleanlyWithEPIPEThoughTheInputNeverEnds() throws {
        Simulation.check(seed: 142) { simulation in
            // 100 lines every 10 ms for 300 ms, and no end of input: only the output's EPIPE can stop the sample.
            for chunk in 1...30 {
                let lines = (1...100).map { "line \((chunk - 1) * 100 + $0)\n" }.joined()
                try simulation.writeStandardInput(lines, at: .milliseconds(Int64(chunk * 10)))
            }
            try simulation.closeStandardOutput(at: .milliseconds(105))
            let said = Locked<[String]>([])
            let outcome = Locked<String>("running")
            try startLines(simulation, said: said, outcome: outcome)
            simulation.runUntilIdle()

            // What was written before the reader went away is all there, and nothing after it.
            XCTAssertEqual(simulation.standardOutputText, (1...1_000).map { "\($0): line \($0)\n" }.joined())
            XCTAssertEqual(simulation.standardOutput.last?.time, ms(100))
            // The chunk at 110 ms holds the 1024th piece since the start, the one the sample waits for:
            // its EPIPE stops the reading there, 200 ms of input unread.
            XCTAssertEqual(outcome.current, "status 0 at 110 ms")
            XCTAssertEqual(said.current, ["lines: standard output was closed by its reader after 1100 lines; stopping"])
        }
    }
}

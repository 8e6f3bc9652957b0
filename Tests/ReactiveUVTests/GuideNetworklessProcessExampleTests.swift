import Glibc
import ReactiveUV
import ReactiveUVTesting
import XCTest

// GUIDE-NETWORKLESS-WORDCOUNT-BEGIN
import ReactiveUV

/// `wc` did not exit 0 (or printed no number).
struct WordCountFailed: Error { let exit: ProcessExit? }

/// Counts the words of `text` with `wc -w`.
func wordCount(of text: String) -> Signal<Int> {
    ChildProcess.run("wc", arguments: ["-w"], input: Array(text.utf8)).collect().flatMap { events -> Signal<Int> in
        var output: [UInt8] = [], exit: ProcessExit?
        for event in events {
            if case .standardOutput(let bytes) = event { output += bytes }
            if case .exited(let status) = event { exit = status }
        }
        guard exit?.succeeded == true, let count = Int(String(decoding: output, as: UTF8.self).filter(\.isNumber)) else {
            return .error(WordCountFailed(exit: exit))
        }
        return .return(count)
    }
}
// GUIDE-NETWORKLESS-WORDCOUNT-END

// GUIDE-NETWORKLESS-NUMBERLINES-BEGIN
/// `cat -n`: numbers the lines of standard input on standard output; sends each line's number.
func numberLines() -> Signal<Int> {
    StandardIO.input().lines()
        .scan((0, [UInt8]())) { previous, line in (previous.0 + 1, line) }
        .map { number, line in
            StandardIO.output.send("\(number): " + String(decoding: line, as: UTF8.self) + "\n")
            return number
        }
}
// GUIDE-NETWORKLESS-NUMBERLINES-END

/// Keeps the process, standard I/O and signal examples of docs/guides/testing-without-a-network.md
/// compiling (each block equals the code between its markers) and runs them.
final class GuideNetworklessProcessExampleTests: XCTestCase {
    static let guide = "docs/guides/testing-without-a-network.md"

    func testTheWordCountIsThisCode() throws {
        try assertDocumentBlock(Self.guide, containing: "func wordCount(", matches: "GUIDE-NETWORKLESS-WORDCOUNT")
    }

    func testTheChildProcessExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock(Self.guide, containing: "addProgram(\"/usr/bin/wc\")", matches: "GUIDE-NETWORKLESS-WC")
        // The example run twice: the same seeds give the same traces (the check mode, for an example
        // that makes its own simulations, as a user would).
        func example() throws -> [UInt64] {
            // GUIDE-NETWORKLESS-WC-BEGIN
            func installWordCount(in simulation: Simulation) throws {
                try simulation.addProgram("/usr/bin/wc") { child in
                    let words = child.standardInput.aggregate(0) { count, chunk in
                        count + String(decoding: chunk, as: UTF8.self).split(separator: " ").count
                    }
                    child.lifetime.add(words.subscribeNext { count in
                        child.write("      \(count)\n")
                        child.exit(status: 0)
                    })
                }
            }
            let simulation = Simulation(seed: 2)
            try installWordCount(in: simulation)
            let count = try simulation.record(wordCount(of: "to be or not to be"))
            simulation.runUntilIdle()
            XCTAssertEqual(count.values, [6])
            XCTAssertEqual(simulation.finish().problems, [])

            // The same program, and wc crashes with SIGSEGV as it starts.
            let crashing = try Simulation(seed: 2, faultPlan: [.childCrash(child: 1, at: .zero, signal: SIGSEGV)])
            try installWordCount(in: crashing)
            let failed = try crashing.record(wordCount(of: "to be or not to be"))
            crashing.runUntilIdle()
            XCTAssertEqual((failed.terminal?.error as? WordCountFailed)?.exit, ProcessExit(status: 0, signal: SIGSEGV))
            XCTAssertEqual(crashing.finish().problems, [])
            // GUIDE-NETWORKLESS-WC-END
            return [simulation.traceHash, crashing.traceHash]
        }
        XCTAssertEqual(try example(), try example())
    }

    func testTheLineNumbererIsThisCode() throws {
        try assertDocumentBlock(Self.guide, containing: "func numberLines(", matches: "GUIDE-NETWORKLESS-NUMBERLINES")
    }

    func testTheStandardIOExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock(Self.guide, containing: "writeStandardInput(\"alpha", matches: "GUIDE-NETWORKLESS-STDIO")
        // The example run twice: the same seeds give the same traces (the check mode, for an example
        // that makes its own simulations, as a user would).
        func example() throws -> [UInt64] {
            // GUIDE-NETWORKLESS-STDIO-BEGIN
            let ms = { (value: UInt64) in SchedulerInstant(nanoseconds: value * 1_000_000) }
            let simulation = Simulation(seed: 3)
            try simulation.writeStandardInput("alpha\nbe", at: .milliseconds(10))
            try simulation.writeStandardInput("ta\n", at: .milliseconds(25))
            try simulation.closeStandardInput(at: .seconds(1))
            let numbered = try simulation.record(numberLines())
            simulation.runUntilIdle()
            XCTAssertEqual(simulation.standardOutputText, "1: alpha\n2: beta\n")
            XCTAssertEqual(simulation.standardOutput.map(\.time), [ms(10), ms(25)])
            XCTAssertEqual(numbered.recorded.last?.time, ms(1_000))  // completed at the end of input
            XCTAssertEqual(simulation.finish().problems, [])
            // GUIDE-NETWORKLESS-STDIO-END
            return [simulation.traceHash]
        }
        XCTAssertEqual(try example(), try example())
    }

    func testTheSignalExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock(Self.guide, containing: "send(signal: SIGTERM", matches: "GUIDE-NETWORKLESS-SIGNALS")
        // The example run twice: the same seeds give the same traces (the check mode, for an example
        // that makes its own simulations, as a user would).
        func example() throws -> [UInt64] {
            // GUIDE-NETWORKLESS-SIGNALS-BEGIN
            let ms = { (value: UInt64) in SchedulerInstant(nanoseconds: value * 1_000_000) }
            let simulation = Simulation(seed: 4)
            // A daemon's work, every second, until SIGTERM or SIGINT.
            let work = Signal<Int>.interval(.seconds(1)).take(until: Signal<Int32>.unixSignals([SIGTERM, SIGINT]))
            let ticks = try simulation.record(work)
            try simulation.send(signal: SIGTERM, at: .milliseconds(2_500))
            simulation.runUntilIdle()
            XCTAssertEqual(ticks.values, [0, 1])
            XCTAssertEqual(ticks.recorded.last?.time, ms(2_500))  // completed when the signal came
            XCTAssertEqual(simulation.finish().problems, [])
            // GUIDE-NETWORKLESS-SIGNALS-END
            return [simulation.traceHash]
        }
        XCTAssertEqual(try example(), try example())
    }
}

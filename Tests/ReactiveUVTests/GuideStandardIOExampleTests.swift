import Foundation
import ReactiveUV
import XCTest

/// Keeps the example of docs/guides/standard-io.md compiling: its lines must equal the body below, which the compiler checks.
///
/// It reads the process's standard input, so it is compiled, not run here; the `lines` sample runs
/// the same loop (LinesSampleTests).
final class GuideStandardIOExampleTests: XCTestCase {
    private static func linesExample(loop: EventLoop) async throws {
        // GUIDE-STDIO-LINES-BEGIN
        let output = StandardIO.output(on: loop)
        var number = 0
        for try await line in StandardIO.input(on: loop).utf8Lines().values {
            number += 1
            // Waiting for the write keeps the queue short when the reader is slow; EPIPE ends the loop.
            if let error = await output.write("\(number): \(line)\n").waitUntilCompleted() { throw error }
        }
        // GUIDE-STDIO-LINES-END
    }

    func testTheLinesExampleIsThisCode() throws {
        try assertDocumentBlock("docs/guides/standard-io.md", containing: "StandardIO.input(on: loop).utf8Lines()", matches: "GUIDE-STDIO-LINES")
        _ = GuideStandardIOExampleTests.linesExample  // referenced so the compiler keeps checking it
    }
}

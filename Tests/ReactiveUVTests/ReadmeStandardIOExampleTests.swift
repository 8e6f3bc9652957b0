import Foundation
import ReactiveUV
import XCTest

/// Keeps the README's standard I/O example compiling: its lines must equal the body below, which the compiler checks.
///
/// It reads the process's standard input, so it is compiled, not run here; the `lines` sample runs
/// the same loop (LinesSampleTests).
final class ReadmeStandardIOExampleTests: XCTestCase {
    private static func readmeStandardIOExample(loop: EventLoop) async throws {
        // README-STDIO-EXAMPLE-BEGIN
        let output = StandardIO.output(on: loop)
        var number = 0
        for try await line in StandardIO.input(on: loop).utf8Lines().values {
            number += 1
            // Waiting for the write keeps the queue short when the reader is slow; EPIPE ends the loop.
            if let error = await output.write("\(number): \(line)\n").waitUntilCompleted() { throw error }
        }
        // README-STDIO-EXAMPLE-END
    }

    func testTheReadmeStandardIOExampleIsThisCode() throws {
        try assertReadmeBlock(containing: "StandardIO.input(on: loop).utf8Lines()", matches: "README-STDIO-EXAMPLE")
        _ = ReadmeStandardIOExampleTests.readmeStandardIOExample  // referenced so the compiler keeps checking it
    }
}

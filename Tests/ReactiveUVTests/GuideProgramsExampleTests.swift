import Foundation
import ReactiveUV
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Keeps the examples of docs/guides/programs.md true: the first is the `server` sample's file (run
/// by ServerSampleTests), the second's lines equal the body below, which the compiler checks.
final class GuideProgramsExampleTests: XCTestCase {
    /// Never called: it would exit the test process.
    private static func awaitingMain() async {
        // GUIDE-PROGRAMS-AWAIT-BEGIN
        let group = EventLoopGroup()
        let server = TCPServer.serve(port: 7000, on: group, onAccepted: { connection in
            _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
        }, drain: Program.drainOnTermination())
        exit(await Program.run(server, shuttingDown: group))
        // GUIDE-PROGRAMS-AWAIT-END
    }

    func testTheServerExampleIsTheServerSample() throws {
        let sample = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("samples/server/main.swift").path
        try assertDocumentBlock("docs/guides/programs.md", containing: "fflush(nil)",
                                matches: "PROGRAM-MAIN", in: sample)
        try assertDocumentBlock("README.md", containing: "fflush(nil)", matches: "PROGRAM-MAIN", in: sample)
    }

    func testTheAwaitExampleIsThisCode() throws {
        try assertDocumentBlock("docs/guides/programs.md", containing: "exit(await Program.run", matches: "GUIDE-PROGRAMS-AWAIT")
        _ = GuideProgramsExampleTests.awaitingMain  // referenced so the compiler keeps checking it
    }
}

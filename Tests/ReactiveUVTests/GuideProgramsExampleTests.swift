import Foundation
import ReactiveUV
import XCTest

/// Keeps the examples of docs/guides/programs.md and the README's server true: each is a sample's
/// file (`server`, `server-await`), which ServerSampleTests runs.
final class GuideProgramsExampleTests: XCTestCase {
    private func sample(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("samples/\(name)/main.swift").path
    }

    func testTheServerExamplesAreTheServerSample() throws {
        try assertDocumentBlock("docs/guides/programs.md", containing: "exit(Program.run", matches: "PROGRAM-MAIN", in: sample("server"))
        try assertDocumentBlock("README.md", containing: "exit(Program.run", matches: "PROGRAM-MAIN", in: sample("server"))
    }

    func testTheAwaitExampleIsTheServerAwaitSample() throws {
        try assertDocumentBlock("docs/guides/programs.md", containing: "exit(await Program.wait", matches: "PROGRAM-AWAIT",
                                in: sample("server-await"))
    }
}

import Foundation
import ReactiveUV
import XCTest

/// Keeps the README's I/O example compiling: its lines must equal the body below, which the compiler checks.
///
/// The example listens on a fixed port and runs for a minute, so it is compiled, not run; the echo
/// and file watch behaviour it shows is tested in TCPTests, EchoServerTests and FileWatchTests.
final class ReadmeIOExampleTests: XCTestCase {
    private static func readmeIOExample() {
        // README-IO-EXAMPLE-BEGIN
        let loop = EventLoop.onCurrentThread()

        // An echo server: what a client sends comes back; its EOF closes the connection.
        let server = TCPServer.listen(host: "127.0.0.1", port: 7000).subscribe(
            next: { connection in
                connection.bytes.subscribe(next: { connection.send($0) },
                                           completed: { connection.close() })
            },
            error: { print("cannot listen:", $0) })

        // Watch a directory; stop everything after a minute.
        let watch = FileWatch.changes(at: "/tmp").subscribeNext { print($0.kind, $0.name) }
        Signal<Void>.timer(after: .seconds(60)).subscribeNext { _ in
            server.dispose()  // closes the listener and every connection it accepted
            watch.dispose()
        }

        loop.run()
        loop.shutdown()
        // README-IO-EXAMPLE-END
    }

    func testTheReadmeIOExampleIsThisCode() throws {
        let here = URL(fileURLWithPath: #filePath)
        let readme = try String(contentsOf: here.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)

        let blocks = readme.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        let block = try XCTUnwrap(blocks.first { $0.contains("TCPServer.listen") }, "the README has no I/O example")
        let readmeLines = block.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0 != "import ReactiveUV" }
        let body = source.components(separatedBy: "// README-IO-EXAMPLE-BEGIN\n")[1]
            .components(separatedBy: "// README-IO-EXAMPLE-END")[0]
        let testLines = body.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertEqual(readmeLines.drop { $0.isEmpty }.reversed().drop { $0.isEmpty }.reversed(),
                       testLines.drop { $0.isEmpty }.reversed().drop { $0.isEmpty }.reversed(),
                       "README.md's I/O example and ReadmeIOExampleTests.readmeIOExample() must stay identical")
        _ = ReadmeIOExampleTests.readmeIOExample  // referenced so the compiler keeps checking it
    }
}

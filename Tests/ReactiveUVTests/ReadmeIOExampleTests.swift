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

        // An echo server: what a client sends comes back; after its EOF, close() sends
        // what is still queued, then FIN, then closes.
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
        try assertReadmeBlock(containing: "TCPServer.listen(host:", matches: "README-IO-EXAMPLE")
        _ = ReadmeIOExampleTests.readmeIOExample  // referenced so the compiler keeps checking it
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the `StreamReader` example of docs/guides/streams.md compiling and runs it. The guide's group and
/// drain examples are run by `TCPGroupServerTests` and `TCPDrainTests`.
final class GuideStreamsExampleTests: XCTestCase {
    static let guide = "docs/guides/streams.md"

    /// One reader serves every client of a two-loop group: each gets its bytes back and is closed after
    /// its EOF (the reader's `completed`), and disposing leaves every group loop with nothing open.
    func testTheReaderExampleIsThisCodeAndEchoesOnEveryLoop() throws {
        try assertDocumentBlock(Self.guide, containing: "StreamReader(next:", matches: "GUIDE-STREAMS-READER")
        let port = try unusedPort()
        let group = EventLoopGroup(loopCount: 2)
        // GUIDE-STREAMS-READER-BEGIN
        let echo = StreamReader(next: { connection, chunk in connection.send(chunk) },
                                completed: { connection in connection.close() })
        let server = TCPServer.serve(port: port, on: group, onAccepted: { connection in
            connection.read(with: echo)
        }).subscribe(error: { print("cannot serve:", $0) })
        // GUIDE-STREAMS-READER-END
        let report = LoopHarness.run(timeout: .seconds(60)) { harness in
            var first: BlockingClient?
            try harness.wait(for: "the server to listen") {
                first = try? BlockingClient(port: port)
                return first != nil
            }
            // Eight clients from eight ports: the kernel spreads them over both loops' sockets.
            let clients = [first!] + (try (1..<8).map { _ in try BlockingClient(port: port) })
            for (index, client) in clients.enumerated() {
                let message = Array("hello \(index)".utf8)
                try client.sendAll(message)
                XCTAssertEqual(try client.receive(exactly: message.count), message)
                client.shutdownWrite()
                XCTAssertEqual(try client.receiveUntilEOF(), [], "the reader's completed closed the connection after the client's EOF")
                client.close()
            }
            server.dispose()
            for loop in group.loops {
                try harness.wait(for: "loop \(loop.name) has nothing open") { (try? loop.openHandles()) == [] }
            }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
        XCTAssertEqual(try group.tryShutdown().map(\.loopCloseResult), [0, 0])
    }
}

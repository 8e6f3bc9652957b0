import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the `StreamReader` and idle-closing drain examples of docs/guides/streams.md compiling and runs
/// them. The guide's group and first drain examples are run by `TCPGroupServerTests` and `TCPDrainTests`.
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

    /// The idle-closing drain on a two-loop group: a client between requests reads EOF at the drain's
    /// start, with nothing more; one whose request is in flight gets its answer, then EOF; and then
    /// every loop has closed everything (the completion disposed the server).
    func testTheIdleClosingDrainExampleIsThisCodeAndClosesIdleClientsFirst() throws {
        try assertDocumentBlock(Self.guide, containing: "closingIdle: true", matches: "GUIDE-STREAMS-IDLE-DRAIN")
        let port = try unusedPort()
        let group = EventLoopGroup(loopCount: 2)
        let shutdownRequested = Subject<Void>()
        // GUIDE-STREAMS-IDLE-DRAIN-BEGIN
        // Each chunk is one request, answered after some work (a database, say). A client between
        // requests is closed when the drain begins; one waiting for its answer gets it, then EOF.
        let drain = shutdownRequested.map { TCPServer.DrainRequest.graceful(timeout: .seconds(10), closingIdle: true) }
        let server = TCPServer.serve(port: port, on: group, onAccepted: { connection in
            connection.draining.subscribeNext { print("draining: finishing", connection) }
            connection.bytes.subscribe(next: { request in
                _ = connection.loop.schedule(after: .milliseconds(100)) {
                    connection.send(Array(request.reversed()))
                    connection.markIdle()  // answered: a drain may close the connection now
                }
            }, completed: { connection.close() })
        }, drain: drain).subscribe(completed: { print("every client has left") })
        // GUIDE-STREAMS-IDLE-DRAIN-END
        let report = LoopHarness.run(timeout: .seconds(60)) { harness in
            var connected: BlockingClient?
            try harness.wait(for: "the server to listen") {
                connected = try? BlockingClient(port: port)
                return connected != nil
            }
            let between = connected!
            defer { between.close() }
            try between.sendAll([1, 2, 3])
            XCTAssertEqual(try between.receive(exactly: 3), [3, 2, 1], "answered before the drain")
            let waiting = try BlockingClient(port: port)
            defer { waiting.close() }
            // An answer first: the server has accepted it (a client still in the kernel's queue is reset by a drain).
            try waiting.sendAll([9])
            XCTAssertEqual(try waiting.receive(exactly: 1), [9])
            try waiting.sendAll([4, 5])
            shutdownRequested.sendNext(())
            let end = between.receiveUntilEnd()
            XCTAssertEqual(end.bytes, [], "the idle client was sent nothing more")
            XCTAssertEqual(end.end, .endOfFile, "the idle client was closed at the drain's start")
            XCTAssertEqual(try waiting.receiveUntilEOF(), [5, 4], "the request in flight was answered, then EOF")
            for loop in group.loops {
                try harness.wait(for: "loop \(loop.name) has nothing open") { (try? loop.openHandles()) == [] }
            }
        }
        server.dispose()
        XCTAssertTrue(report.isClean, "\(report.problems)")
        XCTAssertEqual(try group.tryShutdown().map(\.loopCloseResult), [0, 0])
    }
}

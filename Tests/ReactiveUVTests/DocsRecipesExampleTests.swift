import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

// The DocC catalogs' examples (Sources/ReactiveUV/ReactiveUV.docc, Sources/ReactiveUVTesting/ReactiveUVTesting.docc):
// each block there must equal the code between the markers here (or in the guides' tests), which the
// compiler checks and the tests below run.

// DOCS-LINES-BEGIN
/// Serves one client: each line comes back upper-cased. A client silent for `idle` or sending a
/// line longer than `maxLineLength` bytes is closed (what is queued is sent first); one that reset is dropped.
func serveLines(on connection: TCPConnection, idle: Duration = .seconds(30), maxLineLength: Int = 64 * 1024) {
    _ = connection.bytes
        .utf8Lines(maxLength: maxLineLength)
        .timeout(idle: idle)
        .subscribe(next: { line in connection.send(Array((line.uppercased() + "\n").utf8)) },
                   error: { error in
                       if error is UVError { connection.reset() } else { connection.close() }
                   },
                   completed: { connection.close() })
}
// DOCS-LINES-END

// DOCS-RETRY-BEGIN
/// Connects to a service that may still be starting: a refused connection is tried again
/// `attempts` times, after `firstDelay`, then twice as long each time (100, 200, 400 ms...);
/// any other error (an unknown host, a timeout) ends the signal at once.
func connectWhenReady(port: Int, attempts: Int = 5, firstDelay: Duration = .milliseconds(100)) -> Signal<TCPConnection> {
    TCP.connect(host: "127.0.0.1", port: port, timeout: .seconds(2))
        .retry(upTo: attempts, delay: firstDelay, backoff: 2,
               while: { ($0 as? UVError) == .connectionRefused })
}
// DOCS-RETRY-END

// DOCS-TAIL-BEGIN
/// `tail -F` for a log of modest size: sends what the file holds, then what is appended to it.
/// A file that takes the name (log rotation, an editor's save) or a truncated one is sent from its start.
func follow(_ path: String) -> Signal<[UInt8]> {
    FileWatch.changes(at: path)
        .map { $0.kind == .renamed }  // true: another file took the name
        .startWith(false)
        .flatMap(maxConcurrent: 1) { replaced in Files.read(path).map { (replaced, $0) } }  // one read at a time, in order
        .scan((sent: 0, new: [UInt8]())) { state, read in
            let (replaced, contents) = read
            let start = replaced || contents.count < state.sent ? 0 : state.sent
            return (contents.count, Array(contents[start...]))
        }
        .map { $0.new }
        .filter { !$0.isEmpty }
}
// DOCS-TAIL-END

final class DocsRecipesExampleTests: XCTestCase {
    private static let recipes = "Sources/ReactiveUV/ReactiveUV.docc/Recipes.md"

    func testTheRecipesAreThisCode() throws {
        try assertDocumentBlock(Self.recipes, containing: "func serveLines(on connection:", matches: "DOCS-LINES")
        try assertDocumentBlock(Self.recipes, containing: "func connectWhenReady(", matches: "DOCS-RETRY")
        try assertDocumentBlock(Self.recipes, containing: "func follow(", matches: "DOCS-TAIL")
        try assertDocumentBlock(Self.recipes, containing: "unixSignals([SIGINT, SIGTERM])", matches: "DOCS-SHUTDOWN")
        _ = DocsRecipesExampleTests.gracefulShutdown  // compiled, not run: it listens on a fixed port until Ctrl-C
    }

    /// Getting started's other examples: the README's and the signals guide's, checked against the tests that
    /// run them, and the async loop below.
    func testTheGettingStartedExamplesAreCheckedCode() async throws {
        let article = "Sources/ReactiveUV/ReactiveUV.docc/GettingStarted.md"
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        try assertDocumentBlock(article, containing: "EventLoop.onCurrentThread()\n\nlet ticks", matches: "GUIDE-SIGNALS-TICKS",
                                in: tests.appendingPathComponent("GuideSignalsExampleTests.swift").path)
        try assertDocumentBlock(article, containing: "TCPServer.listen(host:", matches: "README-IO-EXAMPLE",
                                in: tests.appendingPathComponent("ReadmeIOExampleTests.swift").path)
        try assertDocumentBlock(article, containing: "for try await tick in", matches: "DOCS-GS-ASYNC")
        let printed = Locked<[String]>([])
        func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }
        // DOCS-GS-ASYNC-BEGIN
        for try await tick in Signal<Int>.interval(.milliseconds(10)).take(3).values {
            print("tick", tick)
        }
        // DOCS-GS-ASYNC-END
        XCTAssertEqual(printed.current, ["tick 0", "tick 1", "tick 2"])
    }

    /// The shutdown recipe: compiled, not run (it waits for SIGINT or SIGTERM).
    private static func gracefulShutdown() {
        // DOCS-SHUTDOWN-BEGIN
        let loop = EventLoop.onCurrentThread()
        let subscriptions = CompoundDisposable()

        subscriptions.add(TCPServer.listen(port: 7000).subscribe(
            next: { serveLines(on: $0) },
            error: { print("cannot listen:", $0) }))

        // Ctrl-C or `kill`: dispose the server (the listener and every connection close),
        // and the signal watch itself, so nothing is left open and run() returns.
        subscriptions.add(Signal<Int32>.unixSignals([SIGINT, SIGTERM]).subscribeNext { number in
            print("signal \(number): closing")
            subscriptions.dispose()
        })

        loop.run()
        loop.shutdown()
        // DOCS-SHUTDOWN-END
    }

    /// The ReactiveUVTesting catalog's example.
    func testTheTestingCatalogExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock("Sources/ReactiveUVTesting/ReactiveUVTesting.docc/ReactiveUVTesting.md", containing: "LoopHarness.run {",
                                matches: "DOCS-HARNESS")
        // DOCS-HARNESS-BEGIN
        let report = LoopHarness.run { harness in
            let ticks = try harness.record(Signal<Int>.interval(.milliseconds(10)).take(3))
            XCTAssertEqual(try ticks.waitForTermination(), .completed)
            XCTAssertEqual(ticks.values, [0, 1, 2])
        }  // fails the test if a handle is left open or uv_loop_close != 0
        XCTAssertTrue(report.isClean)
        // DOCS-HARNESS-END
    }

    /// The line server answers the lines before a line that is too long, then closes (FIN, not RST)
    /// the client that sent it, without waiting for its newline.
    func testTheLineServerClosesAClientSendingALineTooLong() throws {
        let report = LoopHarness.run { harness in
            let server = try harness.record(TCPServer.serve(port: 0).doNext { event in
                if case .accepted(let connection) = event { serveLines(on: connection, maxLineLength: 8) }
            })
            guard case .listening(let address)? = try server.waitForValues(1).first else { return XCTFail("no listening event") }
            let client = try BlockingClient(port: address.port)
            defer { client.close() }
            try client.sendAll(Array("hel".utf8))
            try client.sendAll(Array("lo\r\nthis line never ends".utf8))
            let (answer, end) = client.receiveUntilEnd()
            XCTAssertEqual(answer, Array("HELLO\n".utf8), "the line before the long one is answered, joined across chunks, CRLF removed")
            XCTAssertEqual(end, .endOfFile, "a client sending a line too long is closed gracefully")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// The line server answers line by line and closes (FIN, not RST) a client that went quiet.
    func testTheLineServerAnswersAndClosesAnIdleClient() throws {
        let report = LoopHarness.run { harness in
            let server = try harness.record(TCPServer.serve(port: 0).doNext { event in
                if case .accepted(let connection) = event { serveLines(on: connection, idle: .milliseconds(200)) }
            })
            guard case .listening(let address)? = try server.waitForValues(1).first else { return XCTFail("no listening event") }
            let client = try BlockingClient(port: address.port)
            defer { client.close() }
            try client.sendAll(Array("hello\nwor".utf8))
            XCTAssertEqual(try client.receive(exactly: 6), Array("HELLO\n".utf8))
            try client.sendAll(Array("ld\n".utf8))
            XCTAssertEqual(try client.receive(exactly: 6), Array("WORLD\n".utf8))
            let start = ContinuousClock.now
            let (rest, end) = client.receiveUntilEnd()
            XCTAssertEqual(rest, [])
            XCTAssertEqual(end, .endOfFile, "an idle client is closed gracefully")
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(150), "closed only after the idle interval")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// Refused connections are retried with growing waits, then the refusal is the error.
    func testConnectWhenReadyRetriesARefusalWithBackoff() throws {
        let port = try unusedPort()
        let report = LoopHarness.run { harness in
            let start = ContinuousClock.now
            let connection = try harness.record(connectWhenReady(port: port, attempts: 3, firstDelay: .milliseconds(20)))
            let terminal = try connection.waitForTermination()
            XCTAssertEqual(terminal.error as? UVError, .connectionRefused, "\(terminal)")
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(20 + 40 + 80), "three waits: 20, 40, 80 ms")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// `follow` sends the file, then each append, then a replacement file from its start.
    func testFollowSendsAppendsAndAReplacementFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docs-tail-\(getpid())-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("app.log").path
        try Data("one\n".utf8).write(to: URL(fileURLWithPath: log))
        let report = LoopHarness.run { harness in
            let followed = try harness.record(follow(log))
            func text() -> String { followed.values.map { String(decoding: $0, as: UTF8.self) }.joined() }
            try harness.wait(for: "the file's contents") { text() == "one\n" }
            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: log))
            handle.seekToEndOfFile()
            handle.write(Data("two\n".utf8))
            try handle.close()
            try harness.wait(for: "the appended line") { text() == "one\ntwo\n" }
            let replacement = directory.appendingPathComponent("app.log.new").path
            try Data("new\n".utf8).write(to: URL(fileURLWithPath: replacement))
            XCTAssertEqual(rename(replacement, log), 0)
            try harness.wait(for: "the replacement file") { text() == "one\ntwo\nnew\n" }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

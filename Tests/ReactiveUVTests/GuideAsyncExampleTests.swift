import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

// GUIDE-ASYNC-ISOLATION-BEGIN
// 1. State confined to the loop. Subscribed on the loop thread, the callbacks run there
//    too; `LoopBound` is Sendable, so both callbacks may capture it, and it checks the thread.
func countTicks(on loop: EventLoop, then report: @escaping @Sendable (Int) -> Void) {
    loop.execute {
        let ticks = LoopBound(0, loop: loop)
        _ = Signal<Int>.interval(.milliseconds(10)).take(3).subscribe(
            next: { _ in ticks.value += 1 },
            completed: { report(ticks.value) })
    }
}

// 2. An actor whose executor is the loop: what it subscribes is delivered on its own
//    thread, so a callback may assume the actor's isolation (checked, not trusted).
actor TickCounter {
    let loop: EventLoop
    private(set) var ticks = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    init(loop: EventLoop) { self.loop = loop }

    func start() -> any Disposable {
        Signal<Int>.interval(.milliseconds(10)).take(3).subscribeNext { _ in
            self.assumeIsolated { counter in counter.ticks += 1 }
        }
    }
}

// 3. Main-actor state: hop to the main actor from the loop thread.
@MainActor final class Dashboard {
    var lastTick = -1

    func follow(_ signal: Signal<Int>) -> any Disposable {
        signal.subscribeNext { tick in
            Task { @MainActor in self.lastTick = tick }
        }
    }
}

// 4. No callback at all: a task reads the values, and its state stays its own.
@MainActor func show(_ signal: Signal<Int>, on dashboard: Dashboard) async throws {
    for try await tick in signal.values { dashboard.lastTick = tick }
}
// GUIDE-ASYNC-ISOLATION-END

/// Polls `condition` every few milliseconds, in the caller's isolation, until it holds or 10 s passed.
private func eventually(_ what: String, isolation: isolated (any Actor)? = #isolation,
                        _ condition: () async -> Bool) async throws {
    let deadline = SchedulerInstant.now + .seconds(10)
    while await !condition() {
        guard SchedulerInstant.now < deadline else { throw WaitTimeout(waitingFor: what, timeout: .seconds(10), observed: "") }
        try await Task.sleep(for: .milliseconds(2))
    }
}

/// Keeps the examples of docs/guides/async.md compiling (each block equals the code between its markers)
/// and runs them: the echo server's second half, `withConnection` against an echo server, and each isolation pattern.
final class GuideAsyncExampleTests: XCTestCase {
    static let guide = "docs/guides/async.md"

    private static func echoExample() async throws -> (Int?, Signal<Int>) {
        // GUIDE-ASYNC-ECHO-BEGIN
        // Each client gets a task; every task runs on `loop` (its task executor).
        func echoServer(port: Int, on loop: EventLoop) async throws {
            try await withThrowingDiscardingTaskGroup { clients in
                for try await connection in TCPServer.listen(port: port, on: loop).values(bufferingPolicy: .unbounded) {
                    clients.addTask(executorPreference: loop) {
                        // A full buffer pauses the socket, so a slow task cannot make memory grow.
                        for try await chunk in connection.bytes.values { connection.send(chunk) }
                        connection.close()  // sends what is still queued, then FIN, then closes
                    }
                }
            }
        }

        // One value awaited (the timer is disposed after it), and async code as a signal.
        let tick = try await Signal<Int>.interval(.milliseconds(10)).first()
        let answer = Signal<Int>.async { try await Task.sleep(for: .milliseconds(5)); return 42 }
        // GUIDE-ASYNC-ECHO-END
        _ = echoServer  // the echo server's behaviour is tested by EchoAsyncSampleTests
        return (tick, answer)
    }

    func testTheEchoExampleIsThisCodeAndWorks() async throws {
        try assertDocumentBlock(Self.guide, containing: "withThrowingDiscardingTaskGroup", matches: "GUIDE-ASYNC-ECHO")
        let (tick, answer) = try await GuideAsyncExampleTests.echoExample()
        XCTAssertEqual(tick, 0)
        let value = try await answer.first()
        XCTAssertEqual(value, 42)
    }

    // GUIDE-ASYNC-WITHCONNECTION-BEGIN
    /// Sends a line and returns the first chunk of the answer.
    func ping(port: Int) async throws -> [UInt8] {
        try await TCP.withConnection(host: "127.0.0.1", port: port) { connection in
            connection.send(Array("ping\n".utf8))
            return try await connection.bytes.first() ?? []
        }   // closed by now: what the body queued was flushed, then FIN
    }
    // GUIDE-ASYNC-WITHCONNECTION-END

    func testTheWithConnectionExampleIsThisCodeAndWorks() async throws {
        try assertDocumentBlock(Self.guide, containing: "func ping(port: Int)", matches: "GUIDE-ASYNC-WITHCONNECTION")
        let harness = LoopHarness(name: "guide-with-connection")
        let echo = try harness.record(EchoServer.run(port: 0, on: harness.loop), label: "echo")
        guard case .listening(let address) = try echo.waitForValues(1)[0] else { throw TestFailure("not listening") }

        let answer = try await ping(port: address.port)

        XCTAssertFalse(answer.isEmpty)
        XCTAssertTrue(Array("ping\n".utf8).starts(with: answer), "\(answer) is the echo's beginning")
        // The echo server sees the client's FIN after the 5 bytes: withConnection closed gracefully.
        try echo.wait(for: "the client to go away") { events in
            events.contains { if case .disconnected(_, 5, nil, _)? = $0.value { true } else { false } }
        }
        let report = harness.finish()
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testTheIsolationExampleIsThisCode() throws {
        try assertDocumentBlock(Self.guide, containing: "LoopBound(0, loop: loop)", matches: "GUIDE-ASYNC-ISOLATION")
    }

    func testLoopBoundStateIsSharedByTheCallbacksOnTheLoop() throws {
        let loop = EventLoop(name: "isolation-loopbound")
        defer { XCTAssertEqual(try? loop.tryShutdown().loopCloseResult, 0) }
        let reported = Locked<Int?>(nil)
        countTicks(on: loop) { reported.current = $0 }
        try waitFor("the count", timeout: .seconds(10)) { reported.current != nil }
        XCTAssertEqual(reported.current, 3)
    }

    func testAnActorOnTheLoopCountsInItsCallbacks() async throws {
        let loop = EventLoop(name: "isolation-actor")
        let counter = TickCounter(loop: loop)
        let subscription = await counter.start()
        try await eventually("three ticks counted") { await counter.ticks >= 3 }
        let ticks = await counter.ticks
        XCTAssertEqual(ticks, 3, "take(3): three ticks, each counted on the actor's loop")
        subscription.dispose()
        try await loop.shutdownGracefully()
    }

    @MainActor
    func testAMainActorHopAndAMainActorTaskUpdateTheDashboard() async throws {
        let dashboard = Dashboard()
        let subscription = dashboard.follow(Signal<Int>.interval(.milliseconds(5)).take(3))
        try await eventually("the third tick on the main actor") { dashboard.lastTick >= 2 }
        XCTAssertEqual(dashboard.lastTick, 2)
        subscription.dispose()

        dashboard.lastTick = -1
        try await show(Signal<Int>.interval(.milliseconds(5)).take(4), on: dashboard)
        XCTAssertEqual(dashboard.lastTick, 3, "the loop of values ended with the signal, after its last value")
    }
}

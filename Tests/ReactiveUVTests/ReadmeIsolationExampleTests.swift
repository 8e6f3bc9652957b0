import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

// README-ISOLATION-EXAMPLE-BEGIN
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
// README-ISOLATION-EXAMPLE-END

/// Polls `condition` every few milliseconds, in the caller's isolation, until it holds or 10 s passed.
private func eventually(_ what: String, isolation: isolated (any Actor)? = #isolation,
                        _ condition: () async -> Bool) async throws {
    let deadline = SchedulerInstant.now + .seconds(10)
    while await !condition() {
        guard SchedulerInstant.now < deadline else { throw WaitTimeout(waitingFor: what, timeout: .seconds(10), observed: "") }
        try await Task.sleep(for: .milliseconds(2))
    }
}

/// Keeps the README's isolation patterns compiling, and runs each.
final class ReadmeIsolationExampleTests: XCTestCase {
    func testTheReadmeIsolationExampleIsThisCode() throws {
        try assertReadmeBlock(containing: "LoopBound(0, loop: loop)", matches: "README-ISOLATION-EXAMPLE")
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

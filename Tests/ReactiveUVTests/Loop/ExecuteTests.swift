import Dispatch
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// A box confined to one loop thread, so loop callbacks can append without a lock.
private final class LoopConfined<Value>: @unchecked Sendable {
    // Only touched on the loop thread (and read by the test after the loop is done with it).
    var value: Value
    init(_ value: Value) { self.value = value }
}

final class ExecuteTests: XCTestCase {
    func testItemsFromManyThreadsRunExactlyOnceInPerThreadOrder() {
        let loop = EventLoop(name: "fan-in")
        defer { loop.shutdown() }
        let threads = 8, perThread = 20_000
        let log = LoopConfined<[[Int]]>(Array(repeating: [], count: threads))
        let offLoop = LoopConfined(0)
        let ran = Locked(0)
        runConcurrently(threads) { thread in
            for sequence in 0..<perThread {
                loop.execute {
                    if !loop.inEventLoop { offLoop.value += 1 }
                    log.value[thread].append(sequence)
                    if sequence == perThread - 1 { ran.withLock { $0 += 1 } }
                }
            }
        }
        waitUntil("every thread's last item") { ran.current == threads }
        let snapshot = onLoop(loop) { UncheckedBox(log.value) }?.value ?? []
        XCTAssertEqual(offLoop.value, 0)
        XCTAssertEqual(snapshot.count, threads)
        for (thread, sequences) in snapshot.enumerated() {
            XCTAssertEqual(sequences, Array(0..<perThread), "thread \(thread)'s items ran out of order, twice, or not at all")
        }
        // Batching: far fewer wake-ups than items.
        XCTAssertLessThan(loop.crossThreadWakeupCount, threads * perThread)
    }

    func testWorkSubmittedOnTheLoopRunsInOrderAfterTheCurrentCallbackWithoutWakeups() {
        let loop = EventLoop(name: "local")
        defer { loop.shutdown() }
        let order = LoopConfined<[String]>([])
        let wakeupsBefore = Locked(0)
        let wakeupsAfter = Locked(-1)
        let done = Locked(false)
        loop.execute {
            wakeupsBefore.withLock { $0 = loop.crossThreadWakeupCount }
            loop.execute {
                order.value.append("A")
                loop.execute { order.value.append("C") }
            }
            loop.execute { order.value.append("B") }
            for index in 0..<1000 { loop.execute { order.value.append("x\(index)") } }
            order.value.append("caller continues first")
            loop.execute {
                wakeupsAfter.withLock { $0 = loop.crossThreadWakeupCount }
                done.withLock { $0 = true }
            }
        }
        waitUntil("local work") { done.current }
        let result = onLoop(loop) { UncheckedBox(order.value) }!.value
        XCTAssertEqual(Array(result.prefix(3)), ["caller continues first", "A", "B"])
        XCTAssertEqual(result.count, 1004)
        XCTAssertEqual(result.last, "C", "work queued by queued work runs after everything queued before it")
        XCTAssertEqual(wakeupsAfter.current, wakeupsBefore.current, "work submitted on the loop thread must not use the async handle")
    }

    /// The loop goes back to sleep between posts; a lost wake-up would leave an item waiting forever.
    func testNoWakeupIsLostAsTheLoopFallsAsleepAndWakes() {
        let loop = EventLoop(name: "wakeups")
        defer { loop.shutdown() }
        let ran = DispatchSemaphore(value: 0)
        for round in 0..<20_000 {
            let burst = round % 100 == 0 ? 50 : 1
            for _ in 0..<burst { loop.execute { ran.signal() } }
            for _ in 0..<burst {
                if ran.wait(timeout: .now() + 5) == .timedOut {
                    XCTFail("round \(round): an item posted from another thread never ran (lost wake-up)")
                    return
                }
            }
        }
        XCTAssertLessThanOrEqual(loop.crossThreadWakeupCount, 20_000 + 200 * 50)
    }

    func testExecuteAfterShutdownIsRefusedVisibly() {
        let loop = EventLoop(name: "closed")
        loop.shutdown()
        let ran = Locked(false)
        XCTAssertThrowsError(try loop.tryExecute { ran.withLock { $0 = true } }) { error in
            XCTAssertEqual(error as? EventLoopError, .shutDown(loop: "closed"))
            XCTAssertEqual("\(error)", "EventLoop 'closed' has shut down: it runs nothing more, and what ran on it has ended")
        }
        loop.execute { ran.withLock { $0 = true } }
        XCTAssertEqual(loop.rejectedSubmissionCount, 1)
        XCTAssertNil(loop.schedule { ran.withLock { $0 = true } })
        XCTAssertNil(loop.schedule(after: .milliseconds(1)) { ran.withLock { $0 = true } })
        XCTAssertEqual(loop.rejectedSubmissionCount, 3)
        XCTAssertFalse(ran.current)
    }

    func testScheduledWorkCanBeCancelledBeforeItRuns() {
        let loop = EventLoop(name: "cancel")
        defer { loop.shutdown() }
        let log = Locked<[String]>([])
        let finished = Locked(false)
        loop.execute {
            let cancelled = loop.schedule { log.withLock { $0.append("cancelled work ran") } }
            loop.schedule { log.withLock { $0.append("kept") } }
            cancelled?.dispose()
            XCTAssertEqual(cancelled?.isDisposed, true)
            loop.schedule { finished.withLock { $0 = true } }
        }
        waitUntil("the sentinel") { finished.current }
        XCTAssertEqual(log.current, ["kept"])
    }
}

/// Carries a non-Sendable snapshot out of a loop callback in tests.
struct UncheckedBox<Value>: @unchecked Sendable {
    // Read by the test only after the loop wrote it.
    let value: Value
    init(_ value: Value) { self.value = value }
}

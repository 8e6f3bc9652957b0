import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// An actor on a loop that reports, when entered, whether loop work queued by its caller
/// has run already: if it has, the call went through the loop's queue (a hop); if not,
/// Swift entered the actor inline.
private actor QueueProbe {
    let loop: EventLoop
    init(loop: EventLoop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    func enter(_ queuedWorkRan: Locked<Bool>) -> (onLoop: Bool, queuedWorkRan: Bool) {
        (loop.inEventLoop, queuedWorkRan.current)
    }
}

/// A second actor on the same loop that calls the probe.
private actor Caller {
    let loop: EventLoop
    let probe: QueueProbe
    init(loop: EventLoop, probe: QueueProbe) {
        self.loop = loop
        self.probe = probe
    }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    func callProbe() async -> (onLoop: Bool, queuedWorkRan: Bool) {
        await callAfterQueueingWork(loop, probe)
    }
}

/// Queues a closure on `loop` (the loop runs its queue in order), then calls the probe:
/// the closure has run when the probe is entered only if the call was queued behind it.
private func callAfterQueueingWork(
    _ loop: EventLoop, _ probe: QueueProbe, isolation: isolated (any Actor)? = #isolation
) async -> (onLoop: Bool, queuedWorkRan: Bool) {
    let ran = Locked(false)
    loop.execute { ran.withLock { $0 = true } }
    return await probe.enter(ran)
}

/// A nonisolated async function: whether it runs on `loop`, and whether the work its caller
/// queued there has run already (if so, the call went through the loop's queue).
private func nonisolatedProbe(_ queuedWorkRan: Locked<Bool>, _ loop: EventLoop) async -> (onLoop: Bool, queuedWorkRan: Bool) {
    (loop.inEventLoop, queuedWorkRan.current)
}

/// Code isolated to a loop calls actors on that loop without a hop through its queue,
/// and iterates `values` without leaving the loop between values.
final class LoopIsolationTests: XCTestCase {
    /// Two actors on one loop, called from a task with no executor preference (the usual
    /// case): the callee is entered inline. (Before the loop's serial executor had its own
    /// identity, every such call went through the queue.)
    func testActorsOnOneLoopCallEachOtherInline() async throws {
        let loop = EventLoop(name: "actors-inline")
        let caller = Caller(loop: loop, probe: QueueProbe(loop: loop))
        let seen = await Task.detached { await caller.callProbe() }.value
        XCTAssertTrue(seen.onLoop)
        XCTAssertFalse(seen.queuedWorkRan, "the call to an actor on the same loop went through the loop's queue")
        try await loop.shutdownGracefully()
    }

    /// A task started with `loop.task` runs isolated to the loop and enters its actors inline.
    func testALoopTaskRunsOnTheLoopAndEntersItsActorsInline() async throws {
        let loop = EventLoop(name: "loop-task")
        let probe = QueueProbe(loop: loop)
        let seen = await loop.task { isolation -> [Bool] in
            let onLoop = loop.inEventLoop && EventLoop.current === loop && isolation.loop === loop
            let call = await callAfterQueueingWork(loop, probe)
            return [onLoop, call.onLoop, call.queuedWorkRan]
        }.value
        XCTAssertEqual(seen, [true, true, false], "on the loop, on the loop in the actor, entered inline")
        let bound = LoopBound([Int](), loop: loop)
        let count = await loop.task { _ -> Int in
            bound.value.append(1)  // loop-confined state is reachable: LoopBound checks the thread
            return bound.value.count
        }.value
        XCTAssertEqual(count, 1)
        try await loop.shutdownGracefully()
    }

    /// A task that prefers the loop runs its nonisolated async calls inline: entering a
    /// nonisolated async function, and coming back from it, go through no queue. (When the
    /// task's jobs ran isolated to the loop's serial executor, Swift had to switch executors
    /// for each: every call and every return went through the loop's queue.) An actor on the
    /// loop is still entered on the loop thread, through the queue.
    func testATaskThatPrefersTheLoopRunsNonisolatedCallsInline() async throws {
        let loop = EventLoop(name: "preference")
        let probe = QueueProbe(loop: loop)
        let seen = await Task(executorPreference: loop) { () -> [String] in
            var seen: [String] = []
            for round in 0..<3 {
                let ran = Locked(false)
                loop.execute { ran.withLock { $0 = true } }
                let inside = await nonisolatedProbe(ran, loop)
                seen.append("call \(round): on loop \(inside.onLoop), queued work ran \(inside.queuedWorkRan)")
                seen.append("back \(round): on loop \(loop.inEventLoop), queued work ran \(ran.current)")
            }
            let ran = Locked(false)
            let actorCall = await probe.enter(ran)
            seen.append("actor: on loop \(actorCall.onLoop)")
            return seen
        }.value
        let expected = (0..<3).flatMap { round in
            ["call \(round): on loop true, queued work ran false", "back \(round): on loop true, queued work ran false"]
        } + ["actor: on loop true"]
        XCTAssertEqual(seen, expected, "a nonisolated call or its return went through the loop's queue, or left the loop")
        try await loop.shutdownGracefully()
    }

    /// `for try await` in a loop-isolated task takes buffered values without leaving the
    /// loop: work queued on the loop between two values has not run when the second arrives.
    func testValuesInALoopTaskStayOnTheLoopBetweenValues() async throws {
        let loop = EventLoop(name: "values-isolated")
        let burst = Signal<Int> { subscriber in
            for value in 0..<3 { subscriber.sendNext(value) }
            subscriber.sendCompleted()
            return nil
        }
        let seen = try await loop.task { _ -> [String] in
            var seen: [String] = []
            var ran: Locked<Bool>?
            for try await value in burst.values {
                seen.append("\(value) on loop: \(loop.inEventLoop), queued work ran: \(ran?.current ?? false)")
                let flag = Locked(false)
                loop.execute { flag.withLock { $0 = true } }
                ran = flag
            }
            return seen
        }.value
        XCTAssertEqual(seen, (0..<3).map { "\($0) on loop: true, queued work ran: false" },
                       "between two buffered values the task left the loop (a hop to the global executor and back)")
        try await loop.shutdownGracefully()
    }

    /// Awaiting a signal's end (`first`, `last`, `FileSystem.stat`) in a loop-isolated task
    /// subscribes on the loop, so the signal's work starts there without a hop to another scheduler.
    func testAwaitingASignalInALoopTaskSubscribesOnTheLoop() async throws {
        let loop = EventLoop(name: "await-isolated")
        let subscribedOn = Locked<[String]>([])
        let probe = Signal<Int> { subscriber in
            subscribedOn.withLock { $0.append("loop thread \(loop.inEventLoop), current scheduler is the loop \(Scheduler.current === loop)") }
            subscriber.sendNext(1)
            subscriber.sendCompleted()
            return nil
        }
        let path = NSTemporaryDirectory() + "reactiveuv-await-isolated-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([1, 2])))
        defer { unlink(path) }
        let size = try await loop.task { _ -> Int in
            _ = try await probe.first()
            _ = try await probe.last()
            return Int(try await FileSystem.stat(path).size)
        }.value
        XCTAssertEqual(size, 2, "FileSystem.stat found the loop without `on:`: the task's current scheduler")
        XCTAssertEqual(subscribedOn.current, Array(repeating: "loop thread true, current scheduler is the loop true", count: 2),
                       "the subscription was made away from the task's loop")
        try await loop.shutdownGracefully()
    }
}

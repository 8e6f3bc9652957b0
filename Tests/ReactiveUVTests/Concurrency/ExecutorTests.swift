import Foundation
import ReactiveUV
import XCTest

/// An actor whose executor is an event loop.
private actor LoopActor {
    let loop: EventLoop
    private var count = 0
    init(loop: EventLoop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    func increment() -> (onLoop: Bool, count: Int) {
        count += 1
        return (loop.inEventLoop, count)
    }
}

/// The calling thread's role, as `Thread.current.threadDictionary` holds it (a synchronous function:
/// `Thread.current` is not for async code). Not the thread's name: a thread inherits its creator's.
private func currentThreadRole() -> String? { Thread.current.threadDictionary["role"] as? String }

final class ExecutorTests: XCTestCase {
    func testATaskWithExecutorPreferenceRunsOnTheLoop() async throws {
        let loop = EventLoop(name: "tasks")
        let seen = await Task(executorPreference: loop) { () -> [Bool] in
            let before = EventLoop.current === loop
            try? await Task.sleep(for: .milliseconds(2))  // resumes on the loop again
            return [before, EventLoop.current === loop, loop.inEventLoop]
        }.value
        XCTAssertEqual(seen, [true, true, true])
        let preferred = await withTaskExecutorPreference(loop) { EventLoop.current?.name }
        XCTAssertEqual(preferred, "tasks")
        try await loop.shutdownGracefully()
    }

    func testAnActorOnALoopExecutorRunsOnTheLoopThread() async throws {
        let loop = EventLoop(name: "actor")
        let actor = LoopActor(loop: loop)
        var last = 0
        for _ in 0..<100 {
            let (onLoop, count) = await actor.increment()
            XCTAssertTrue(onLoop)
            last = count
        }
        XCTAssertEqual(last, 100)
        try await loop.shutdownGracefully()
    }

    func testManyTasksOnOneLoopRunSerially() async throws {
        let loop = EventLoop(name: "serial")
        let counter = LoopBound(0, loop: loop)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 {
                group.addTask(executorPreference: loop) {
                    counter.value += 1  // loop-confined: LoopBound checks the thread
                }
            }
        }
        let total = await Task(executorPreference: loop) { counter.value }.value
        XCTAssertEqual(total, 1000)
        try await loop.shutdownGracefully()
    }

    func testAssumeInEventLoopRunsOnTheLoop() async throws {
        let loop = EventLoop(name: "assume")
        let answer = await Task(executorPreference: loop) { loop.assumeInEventLoop { EventLoop.current?.name } }.value
        XCTAssertEqual(answer, "assume")
        try await loop.shutdownGracefully()
    }

    func testShutdownGracefullyRefusesToWaitForItself() async throws {
        let loop = EventLoop(name: "graceful")
        let thrown = await Task(executorPreference: loop) { () -> EventLoopError? in
            do { try await loop.shutdownGracefully() } catch { return error as? EventLoopError }
            return nil
        }.value
        XCTAssertEqual(thrown, .calledOnLoopThread(operation: "shutdownGracefully()", loop: "graceful"))
        let report = try await loop.shutdownGracefully()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertTrue(loop.isShutDown)

        let group = EventLoopGroup(loopCount: 2, name: "graceful-group")
        let reports = try await group.shutdownGracefully()
        XCTAssertEqual(reports.map(\.loopCloseResult), [0, 0])
    }

    /// A task on a loop that has closed, cancelled while it waits for `values`: its next job is
    /// late, and it must run after the cancellation, not inside it. Run inline by the cancelling
    /// thread (as late jobs were), the task went on to its end inside its own cancellation handler,
    /// under the task's status lock, and freed the channel the handler was still using: the
    /// process crashed (`ValuesChannel.acknowledgeEnd`, release and debug builds).
    func testALateTaskCancelledWhileItWaitsGoesOnAfterTheCancellationOnAThreadOfItsOwn() async throws {
        let loop = EventLoop(name: "closed")
        try await loop.shutdownGracefully()
        let subscribed = DispatchSemaphore(value: 0)
        let waitsForever = Signal<Int> { _ in
            subscribed.signal()
            return nil
        }
        let task = Task(executorPreference: loop) { () -> (thread: String?, received: Int, laterAwait: Bool) in
            var received = 0
            do { for try await _ in waitsForever.values { received += 1 } } catch {}
            let thread = currentThreadRole()
            // Another await touches the task's status again (the old inline run had its lock held).
            let laterAwait = await withTaskCancellationHandler { Task.isCancelled } onCancel: {}
            return (thread, received, laterAwait)
        }
        XCTAssertEqual(subscribed.wait(timeout: .now() + .seconds(10)), .success, "the task never subscribed")
        onNewThread {
            Thread.current.threadDictionary["role"] = "canceller"
            task.cancel()
        }
        let outcome = await task.value
        XCTAssertNotEqual(outcome.thread, "canceller", "the late job ran inside task.cancel(), on the cancelling thread")
        XCTAssertEqual(outcome.received, 0)
        XCTAssertTrue(outcome.laterAwait, "the task did not see its cancellation")
    }
}

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
}

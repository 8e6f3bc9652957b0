import Foundation
import Logging
import ReactiveUV
import ReactiveUVServiceLifecycle
import ReactiveUVTesting
import ServiceLifecycle
import ServiceLifecycleTestKit
import XCTest

/// `EventLoopGroup` and `EventLoop` as swift-service-lifecycle services.
final class EventLoopServiceTests: XCTestCase {
    private let logger = Logger(label: "EventLoopServiceTests")

    /// Every loop of `group` has closed, and `uv_loop_close` returned 0 for each.
    private func assertShutDownCleanly(_ group: EventLoopGroup, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(group.loops.map(\.isShutDown), [true, true], "every loop shut down", file: file, line: line)
        // Asking again returns the report each loop's shutdown made.
        let reports = try group.tryShutdown()
        XCTAssertEqual(reports.map(\.loopCloseResult), [0, 0], "uv_loop_close returned 0", file: file, line: line)
    }

    func testGracefulShutdownStopsTheServiceThenShutsEveryLoopDown() async throws {
        let group = EventLoopGroup(loopCount: 2, name: "service-graceful")
        let echo = EchoOnGroupService(group: group)
        // The group first: a ServiceGroup shuts services down in reverse order.
        let services = ServiceGroup(services: [group, echo], logger: logger)
        let running = Task { try await services.run() }
        try echo.waitUntilServing()
        XCTAssertEqual(group.loops.map(\.isShutDown), [false, false], "the loops run until graceful shutdown")

        await services.triggerGracefulShutdown()
        try await running.value

        XCTAssertEqual(echo.loopsRunningAtEnd.current, true, "the service using the loops stopped before they shut down")
        try assertShutDownCleanly(group)
    }

    func testSIGTERMShutsTheGroupDown() async throws {
        let group = EventLoopGroup(loopCount: 2, name: "service-sigterm")
        let echo = EchoOnGroupService(group: group)
        let services = ServiceGroup(services: [group, echo], gracefulShutdownSignals: [.sigterm], logger: logger)
        let running = Task { try await services.run() }
        // ServiceGroup traps its signals before it starts any service: once the echo
        // service serves, SIGTERM reaches the group's handler, not the default (kill).
        try echo.waitUntilServing()

        kill(getpid(), SIGTERM)
        try await running.value

        XCTAssertEqual(echo.loopsRunningAtEnd.current, true)
        try assertShutDownCleanly(group)
    }

    func testCancellationShutsEveryLoopDown() async throws {
        let group = EventLoopGroup(loopCount: 2, name: "service-cancel")
        let echo = EchoOnGroupService(group: group)
        let services = ServiceGroup(services: [group, echo], logger: logger)
        let running = Task { try await services.run() }
        try echo.waitUntilServing()

        running.cancel()
        // ServiceGroup reports its cancellation as it likes (it may rethrow a service's CancellationError).
        _ = await running.result

        try assertShutDownCleanly(group)
    }

    func testAGroupAlreadyShutDownReturnsAtOnce() async throws {
        let group = EventLoopGroup(loopCount: 2, name: "service-done")
        group.shutdown()
        // No graceful shutdown, no cancellation: run() must not wait for either.
        let returned = expectation(description: "run() returned")
        let running = Task {
            defer { returned.fulfill() }
            try await group.run()
        }
        await fulfillment(of: [returned], timeout: 20)
        running.cancel()  // only a run() that failed to return is still waiting
        try await running.value
        try assertShutDownCleanly(group)
    }

    func testALoopShutDownElsewhereEndsTheGroupsRun() async throws {
        let group = EventLoopGroup(loopCount: 2, name: "service-external")
        let returned = expectation(description: "run() returned")
        let running = Task {
            defer { returned.fulfill() }
            try await group.run()
        }
        // Whether run() is already waiting or not yet, the shutdown of one loop ends it.
        group.loops[1].shutdown()
        await fulfillment(of: [returned], timeout: 20)
        running.cancel()  // only a run() that failed to return is still waiting
        try await running.value
        try assertShutDownCleanly(group)
    }

    func testASingleLoopShutsDownAtGracefulShutdown() async throws {
        let loop = EventLoop(name: "service-single")
        try await testGracefulShutdown { trigger in
            let running = Task { try await loop.run() }
            XCTAssertFalse(loop.isShutDown)
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        XCTAssertTrue(loop.isShutDown)
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
    }

    func testASingleLoopShutsDownWhenCancelled() async throws {
        let loop = EventLoop(name: "service-single-cancel")
        let running = Task { try await loop.run() }
        running.cancel()
        try await running.value
        XCTAssertTrue(loop.isShutDown)
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
    }

    func testTheSharedLoopIsLeftRunningAtGracefulShutdown() async throws {
        try await testGracefulShutdown { trigger in
            let running = Task { try await EventLoop.shared.run() }
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        XCTAssertFalse(EventLoop.shared.isShutDown)
        let ran = await withCheckedContinuation { continuation in
            EventLoop.shared.execute { continuation.resume(returning: true) }
        }
        XCTAssertTrue(ran, "the shared loop still runs work")
    }

    func testAnOwnerThreadLoopIsRefusedWithAClearError() throws {
        let outcome = Locked<String>("")
        onNewThread {
            let loop = EventLoop.onCurrentThread(name: "owner-service")
            let done = DispatchSemaphore(value: 0)
            let running = Task {
                do {
                    try await loop.run()
                    outcome.withLock { $0 = "returned" }
                } catch {
                    outcome.withLock { $0 = "\(error)" }
                    if (error as? EventLoopServiceError) != .ownerThreadLoop(loop: "owner-service") {
                        outcome.withLock { $0 += " (not EventLoopServiceError.ownerThreadLoop)" }
                    }
                }
                done.signal()
            }
            if done.wait(timeout: .now() + 20) == .timedOut {
                running.cancel()
                done.wait()
                outcome.withLock { $0 = "run() waited instead of refusing" }
            }
            loop.shutdown()
        }
        XCTAssertTrue(outcome.current.hasPrefix("EventLoop 'owner-service' runs on its owner's thread"), outcome.current)
        XCTAssertFalse(outcome.current.contains("(not "), outcome.current)
    }
}

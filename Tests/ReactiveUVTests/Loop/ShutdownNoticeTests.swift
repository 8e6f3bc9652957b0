import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `EventLoop.onShutdown(_:)`: code outside the loop hears, once, that it is going away.
final class ShutdownNoticeTests: XCTestCase {
    func testTheObserverRunsOnceOnTheLoopThreadWhenTheLoopShutsDown() {
        let loop = EventLoop(name: "notice")
        let calls = Locked<[Bool]>([])
        let registration = loop.onShutdown { calls.withLock { $0.append(loop.inEventLoop) } }
        XCTAssertNotNil(registration)
        XCTAssertEqual(calls.current, [], "not before the shutdown")
        loop.shutdown()
        XCTAssertEqual(calls.current, [true], "once, on the loop's thread, before shutdown() returned")
        registration?.dispose()
    }

    func testADisposedObserverIsNotCalled() {
        let loop = EventLoop(name: "notice-disposed")
        let called = Locked(false)
        loop.onShutdown { called.withLock { $0 = true } }?.dispose()
        loop.shutdown()
        XCTAssertFalse(called.current)
    }

    func testNoRegistrationOnAClosedLoopOrTheSharedLoop() {
        let loop = EventLoop(name: "notice-closed")
        loop.shutdown()
        let called = Locked(false)
        XCTAssertNil(loop.onShutdown { called.withLock { $0 = true } }, "a closed loop will never call it: nil says so")
        XCTAssertNil(EventLoop.shared.onShutdown { called.withLock { $0 = true } }, "the shared loop never shuts down")
        XCTAssertFalse(called.current)
        XCTAssertTrue(EventLoop.shared.ownsThread)
        XCTAssertTrue(EventLoop.shared.isShared)
        XCTAssertFalse(loop.isShared)
    }
}

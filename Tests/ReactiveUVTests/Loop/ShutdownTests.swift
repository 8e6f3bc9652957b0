import CLibUV
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class ShutdownTests: XCTestCase {
    func testShutdownClosesHandlesStillOpenAndReportsThem() throws {
        let loop = EventLoop(name: "open-handles")
        let ran = Locked(false)
        let timer = loop.schedule(after: .seconds(3600)) { ran.withLock { $0 = true } }
        XCTAssertNotNil(timer)
        waitUntil("the timer to open") { (try? loop.openHandles().count) == 1 }
        let open = try loop.openHandles()
        XCTAssertEqual(open.map(\.kind), ["timer"])
        XCTAssertEqual(open.first?.isActive, true)
        XCTAssertTrue(open.first?.label?.contains("schedule(after: 3600") == true, "\(open)")

        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(report.closedHandles.map(\.kind), ["timer"])
        XCTAssertTrue(loop.isShutDown)
        XCTAssertFalse(ran.current, "shutdown cancels pending timers instead of running them")
        timer?.dispose()  // disposing after shutdown is harmless
    }

    func testWorkAcceptedBeforeShutdownStillRuns() {
        let loop = EventLoop(name: "drain")
        let count = Locked(0)
        for _ in 0..<10_000 { loop.execute { count.withLock { $0 += 1 } } }
        loop.shutdown()
        XCTAssertEqual(count.current, 10_000)
    }

    func testShutdownOnTheLoopThreadDoesNotDeadlock() {
        let loop = EventLoop(name: "self")
        let thrown = Locked<EventLoopError?>(nil)
        loop.execute {
            do { try loop.tryShutdown() } catch { thrown.withLock { $0 = error as? EventLoopError } }
            loop.shutdown()  // starts the shutdown; cannot wait for its own thread
        }
        waitUntil("the loop to finish shutting itself down") { loop.isShutDown }
        XCTAssertEqual(thrown.current, .calledOnLoopThread(operation: "shutdown()", loop: "self"))
        XCTAssertTrue("\(thrown.current!)".contains("a loop thread never waits"))
        loop.shutdown()  // and from outside afterwards: returns at once
    }

    func testConcurrentShutdownsAllReturn() {
        let loop = EventLoop(name: "racing")
        loop.schedule(after: .seconds(60)) {}
        runConcurrently(6) { _ in loop.shutdown() }
        XCTAssertTrue(loop.isShutDown)
    }

    func testShutdownClosesHandlesOpenedByOtherCode() throws {
        let loop = EventLoop(name: "foreign")
        let memory = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(UV_TIMER), alignment: 16)
        let timer = memory.bindMemory(to: uv_timer_t.self, capacity: 1)
        let address = UInt(bitPattern: memory)
        let started = onLoop(loop) { () -> Int32 in
            let timer = UnsafeMutablePointer<uv_timer_t>(bitPattern: address)!
            uv_timer_init(loop.uvLoop, timer)
            return uv_timer_start(timer, { _ in }, 3_600_000, 0)
        }
        XCTAssertEqual(started, 0)
        let open = try loop.openHandles()
        XCTAssertEqual(open.count, 1)
        XCTAssertNil(open.first?.label, "a handle ReactiveUV did not open has no label")
        XCTAssertTrue(open.first!.description.contains("not opened by ReactiveUV"))

        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(report.closedHandles.count, 1)
        _ = timer
        memory.deallocate()  // ours to free, now that the loop is closed
    }

    func testShutdownTellsSignalSubscribersTheLoopWentAway() throws {
        let loop = EventLoop(name: "signals")
        let recorder = onLoop(loop) { UncheckedBox(EventRecorder(Signal<Int32>.unixSignals([SIGHUP]))) }!.value
        waitUntil("the signal handle") { (try? loop.openHandles().count) == 1 }
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.closedHandles.map(\.kind), ["signal"])
        XCTAssertEqual(recorder.events, [.error(EventLoopError.shutDown(loop: "signals"))])
        XCTAssertEqual(report.loopCloseResult, 0)
    }

    func testGroupRoundRobinAndShutdown() throws {
        let group = EventLoopGroup(loopCount: 3, name: "g")
        let picked = (0..<7).map { _ in group.next().name }
        XCTAssertEqual(picked, ["g-0", "g-1", "g-2", "g-0", "g-1", "g-2", "g-0"])
        XCTAssertEqual(Set(group.loops.map { ObjectIdentifier($0) }).count, 3)
        let reports = try group.tryShutdown()
        XCTAssertEqual(reports.map(\.loopCloseResult), [0, 0, 0])
        XCTAssertTrue(group.loops.allSatisfy(\.isShutDown))
        XCTAssertEqual(EventLoopGroup(loopCount: 0).loops.count, 1, "at least one loop")
    }
}

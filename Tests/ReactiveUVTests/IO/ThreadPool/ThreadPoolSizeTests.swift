import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `ThreadPool.size` and `ThreadPool.setSize(_:)`.
final class ThreadPoolSizeTests: XCTestCase {
    /// Set in the child process that `testSetSizeBeforeFirstUseSizesThePoolAndIsRefusedAfter` starts.
    private static let probeVariable = "REACTIVEUV_POOL_SIZE_PROBE"

    func testASizeOutsideOneToTenTwentyFourIsEINVAL() {
        for size in [0, -1, 1025, Int.max] {
            XCTAssertThrowsError(try ThreadPool.setSize(size), "size \(size)") { error in
                let error = error as? UVError
                XCTAssertEqual(error?.name, "EINVAL")
                XCTAssertTrue(error?.message.contains("1...1024") == true && error?.message.contains("\(size)") == true, "\(String(describing: error))")
            }
        }
    }

    /// Once this process has queued work on the pool, a new size is refused with EBUSY naming why.
    func testSetSizeAfterFirstUseIsEBUSY() throws {
        let loop = EventLoop(name: "pool user")
        defer { loop.shutdown() }
        XCTAssertEqual(try ThreadPool.run(on: loop) { 7 }.first(timeout: .seconds(10)), 7)
        let size = ThreadPool.size
        XCTAssertThrowsError(try ThreadPool.setSize(size == 3 ? 2 : 3)) { error in
            let error = error as? UVError
            XCTAssertEqual(error?.name, "EBUSY")
            XCTAssertTrue(error?.message.contains("already started with \(size) threads") == true, "\(String(describing: error))")
        }
        XCTAssertEqual(ThreadPool.size, size, "the refused size changed nothing")
    }

    /// In a fresh process (this test again, with the probe variable set): `setSize(2)` before any
    /// pool use starts a pool of exactly 2 threads (counted in /proc/self/task by name), and is refused after.
    func testSetSizeBeforeFirstUseSizesThePoolAndIsRefusedAfter() throws {
        if ProcessInfo.processInfo.environment[Self.probeVariable] != nil {
            try probeInFreshProcess()
            return
        }
        let text = try runTestInFreshProcess("ThreadPoolSizeTests/testSetSizeBeforeFirstUseSizesThePoolAndIsRefusedAfter",
                                             environment: [Self.probeVariable: "1", "UV_THREADPOOL_SIZE": nil])
        XCTAssertTrue(text.contains("pool probe: 4 before, 2 threads started, EBUSY after"), text)
    }

    private func probeInFreshProcess() throws {
        let defaultSize = ThreadPool.size
        let loop = EventLoop(name: "probe")
        defer { loop.shutdown() }
        try ThreadPool.setSize(2)
        XCTAssertEqual(ThreadPool.size, 2)
        // The shared loop (home of a subscription made off any loop) starts its thread now, not during the count.
        XCTAssertEqual(onLoop(EventLoop.shared) { 0 }, 0)
        let threadsBefore = threads()
        // libuv starts every pool thread at the first request (and waits for them to start).
        XCTAssertEqual(try ThreadPool.run(on: loop) { 1 }.first(timeout: LoopHarness.defaultTimeout), 1)
        // libuv starts the pool's threads from the thread of the first request, the probe loop's,
        // so they carry its name; other threads the runtime starts meanwhile (Dispatch's) do not count.
        let started = threads().subtracting(threadsBefore).filter { threadName($0) == "uv-probe" }.count
        var refusal = "no error"
        do {
            try ThreadPool.setSize(3)
        } catch {
            refusal = error.name
        }
        print("pool probe: \(defaultSize) before, \(started) threads started, \(refusal) after")
    }

    /// The ids of this process's threads.
    private func threads() -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [])
    }

    /// A thread's name (the name a loop gives its thread, "uv-NAME", is inherited by the threads it starts).
    private func threadName(_ id: String) -> String {
        ((try? String(contentsOfFile: "/proc/self/task/\(id)/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
    }
}

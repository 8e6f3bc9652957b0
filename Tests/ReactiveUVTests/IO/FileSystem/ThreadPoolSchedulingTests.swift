import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `ThreadPool.threadScheduling`: libuv's pool threads start under `SCHED_BATCH`, so a pool
/// thread woken by a loop's request does not switch that loop out (issue 17, stat throughput).
final class ThreadPoolSchedulingTests: XCTestCase {
    /// Set in the child process the fresh-process tests start: the scheduling to ask for.
    private static let probeVariable = "REACTIVEUV_POOL_SCHEDULING_PROBE"
    private static let batchPolicy: Int32 = 3

    /// Every pool thread a job lands on runs under SCHED_BATCH (this process's pool was started by this library).
    func testPoolThreadsRunUnderBatchScheduling() throws {
        let loop = EventLoop(name: "pool scheduling")
        defer { loop.shutdown() }
        XCTAssertEqual(ThreadPool.threadScheduling, .batch)
        let jobs = (0..<16).map { _ in
            ThreadPool.run(on: loop) { () -> Int32 in
                usleep(2_000)  // holds the thread, so the next jobs land on the others
                return sched_getscheduler(0)
            }
        }
        let policies = try XCTUnwrap(try Signal.merge(jobs).collect().first(timeout: .seconds(20)))
        XCTAssertEqual(policies.count, 16)
        XCTAssertEqual(Set(policies), [Self.batchPolicy], "the pool threads' policies: \(policies)")
        // The loop threads themselves keep the default policy.
        XCTAssertEqual(onLoop(loop) { sched_getscheduler(0) }, SCHED_OTHER)
    }

    /// Once the pool has started, a new scheduling is refused with EBUSY naming why, and nothing changes.
    func testSetThreadSchedulingAfterFirstUseIsEBUSY() throws {
        let loop = EventLoop(name: "pool user")
        defer { loop.shutdown() }
        XCTAssertEqual(try ThreadPool.run(on: loop) { 7 }.first(timeout: .seconds(10)), 7)
        XCTAssertThrowsError(try ThreadPool.setThreadScheduling(.inherited)) { error in
            let error = error as? UVError
            XCTAssertEqual(error?.name, "EBUSY")
            XCTAssertTrue(error?.message.contains("already started, its threads scheduled as batch") == true, "\(String(describing: error))")
            XCTAssertTrue(error?.context.contains("setThreadScheduling(.inherited)") == true, "\(String(describing: error))")
        }
        XCTAssertEqual(ThreadPool.threadScheduling, .batch)
    }

    /// The switch the pool's start makes: SCHED_BATCH inside, SCHED_OTHER again after.
    func testBatchSchedulingIsPutBackAfterTheBody() {
        let outcome = PoolStartRequest.withBatchScheduling { sched_getscheduler(0) }
        guard case .ran(let inside) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(inside, Self.batchPolicy)
        XCTAssertEqual(sched_getscheduler(0), SCHED_OTHER)
    }

    /// In a fresh process: the loop that starts the pool is back to SCHED_OTHER right after, and the pool's threads run batch.
    func testAFreshPoolStartsBatchAndTheLoopKeepsItsPolicy() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] {
            try probeInFreshProcess(probe)
            return
        }
        XCTAssertTrue(try runProbe("batch", test: "testAFreshPoolStartsBatchAndTheLoopKeepsItsPolicy")
            .contains("scheduling probe: loop 0 after the first request, pool 3"))
    }

    /// In a fresh process, `.inherited` set before the first use: the pool's threads take the loop's policy (libuv's way).
    func testInheritedSchedulingLeavesThePoolAsLibUVMakesIt() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] {
            try probeInFreshProcess(probe)
            return
        }
        XCTAssertTrue(try runProbe("inherited", test: "testInheritedSchedulingLeavesThePoolAsLibUVMakesIt")
            .contains("scheduling probe: loop 0 after the first request, pool 0"))
    }

    private func runProbe(_ scheduling: String, test: String) throws -> String {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = ["ReactiveUVTests.ThreadPoolSchedulingTests/\(test)"]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.probeVariable] = scheduling
        environment["SWIFT_BACKTRACE"] = "enable=no"
        child.environment = environment
        let output = Pipe()
        child.standardOutput = output
        child.standardError = output
        try child.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationStatus, 0, text)
        XCTAssertFalse(text.contains("ReactiveUV:"), "no complaint on standard error: \(text)")
        return text
    }

    private func probeInFreshProcess(_ scheduling: String) throws {
        if scheduling == "inherited" { try ThreadPool.setThreadScheduling(.inherited) }
        let loop = EventLoop(name: "probe")
        defer { loop.shutdown() }
        // The file request is the process's first pool use: the pool starts on this loop's thread.
        let path = NSTemporaryDirectory() + "reactiveuv-scheduling-probe-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([1])))
        defer { unlink(path) }
        XCTAssertEqual(try Files.stat(path, on: loop).first(timeout: .seconds(10))?.size, 1)
        let loopPolicy = onLoop(loop) { sched_getscheduler(0) }
        let poolPolicy = try ThreadPool.run(on: loop) { sched_getscheduler(0) }.first(timeout: .seconds(10))
        print("scheduling probe: loop \(loopPolicy ?? -1) after the first request, pool \(poolPolicy ?? -1)")
    }
}

import CLibUV
import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `ThreadPool.threadScheduling`: libuv's pool threads start under `SCHED_BATCH` on one CPU (or when asked),
/// so a pool thread woken by a loop's request does not switch that loop out (issue 17, stat throughput).
final class ThreadPoolSchedulingTests: XCTestCase {
    /// Set in the child process the fresh-process tests start: the scheduling to ask for.
    private static let probeVariable = "REACTIVEUV_POOL_SCHEDULING_PROBE"

    /// In this process (the pool started by this library, `.automatic`): every pool thread a job lands on runs
    /// batch if the process may use one CPU only, under the default policy otherwise; the loops keep the default.
    func testPoolThreadsFollowTheAutomaticRule() throws {
        let loop = EventLoop(name: "pool scheduling")
        defer { loop.shutdown() }
        XCTAssertEqual(ThreadPool.threadScheduling, .automatic)
        let expected = uv_available_parallelism() == 1 ? PoolStartRequest.batchPolicy : SCHED_OTHER
        let jobs = (0..<16).map { _ in
            ThreadPool.run(on: loop) { () -> Int32 in
                usleep(2_000)  // holds the thread, so the next jobs land on the others
                return sched_getscheduler(0)
            }
        }
        let policies = try XCTUnwrap(try Signal.merge(jobs).collect().first(timeout: .seconds(20)))
        XCTAssertEqual(policies.count, 16)
        XCTAssertEqual(Set(policies), [expected], "the pool threads' policies: \(policies)")
        XCTAssertEqual(onLoop(loop) { sched_getscheduler(0) }, SCHED_OTHER)
    }

    /// Once the pool has started, a new scheduling is refused with EBUSY naming why, and nothing changes.
    func testSetThreadSchedulingAfterFirstUseIsEBUSY() throws {
        let loop = EventLoop(name: "pool user")
        defer { loop.shutdown() }
        XCTAssertEqual(try ThreadPool.run(on: loop) { 7 }.first(timeout: .seconds(10)), 7)
        XCTAssertThrowsError(try ThreadPool.setThreadScheduling(.batch)) { error in
            let error = error as? UVError
            XCTAssertEqual(error?.name, "EBUSY")
            XCTAssertTrue(error?.message.contains("already started, its threads scheduled as automatic") == true, "\(String(describing: error))")
            XCTAssertTrue(error?.context.contains("setThreadScheduling(.batch)") == true, "\(String(describing: error))")
        }
        XCTAssertEqual(ThreadPool.threadScheduling, .automatic)
    }

    /// The switch the pool's start makes: SCHED_BATCH inside, SCHED_OTHER again after.
    func testBatchSchedulingIsPutBackAfterTheBody() {
        let outcome = PoolStartRequest.withBatchScheduling { sched_getscheduler(0) }
        guard case .ran(let inside) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(inside, PoolStartRequest.batchPolicy)
        XCTAssertEqual(sched_getscheduler(0), SCHED_OTHER)
    }

    /// In a fresh process allowed one CPU (`taskset -c 0`), `.automatic`: the pool's threads run batch, and the
    /// loop that started the pool is back to SCHED_OTHER right after.
    func testOnOneCPUThePoolStartsBatchAndTheLoopKeepsItsPolicy() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        XCTAssertTrue(try runProbe("automatic", oneCPU: true, test: "testOnOneCPUThePoolStartsBatchAndTheLoopKeepsItsPolicy")
            .contains("scheduling probe: 1 CPU, loop 0 after the first request, pool 3"))
    }

    /// In a fresh process allowed every CPU, `.automatic`: with two or more, libuv's way (the pool inherits SCHED_OTHER).
    func testOnSeveralCPUsThePoolIsAsLibUVMakesIt() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        let cpus = uv_available_parallelism()
        XCTAssertTrue(try runProbe("automatic", oneCPU: false, test: "testOnSeveralCPUsThePoolIsAsLibUVMakesIt")
            .contains("scheduling probe: \(cpus) CPU, loop 0 after the first request, pool \(cpus == 1 ? 3 : 0)"))
    }

    /// In a fresh process, `.batch` set before the first use: batch threads whatever the CPUs.
    func testBatchAskedForIsBatchOnAnyNumberOfCPUs() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        XCTAssertTrue(try runProbe("batch", oneCPU: false, test: "testBatchAskedForIsBatchOnAnyNumberOfCPUs")
            .contains("loop 0 after the first request, pool 3"))
    }

    /// In a fresh process on one CPU, `.inherited` set before the first use: the pool's threads take the loop's policy.
    func testInheritedSchedulingLeavesThePoolAsLibUVMakesIt() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        XCTAssertTrue(try runProbe("inherited", oneCPU: true, test: "testInheritedSchedulingLeavesThePoolAsLibUVMakesIt")
            .contains("scheduling probe: 1 CPU, loop 0 after the first request, pool 0"))
    }

    /// Runs `test` again in a fresh process asking for `scheduling` (on CPU 0 alone with `oneCPU`).
    private func runProbe(_ scheduling: String, oneCPU: Bool, test: String) throws -> String {
        let text = try runTestInFreshProcess("ThreadPoolSchedulingTests/\(test)", environment: [Self.probeVariable: scheduling], oneCPU: oneCPU)
        XCTAssertFalse(text.contains("ReactiveUV:"), "no complaint on standard error: \(text)")
        return text
    }

    private func probeInFreshProcess(_ scheduling: String) throws {
        switch scheduling {
        case "batch": try ThreadPool.setThreadScheduling(.batch)
        case "inherited": try ThreadPool.setThreadScheduling(.inherited)
        default: XCTAssertEqual(ThreadPool.threadScheduling, .automatic)
        }
        let loop = EventLoop(name: "probe")
        defer { loop.shutdown() }
        // The file request is the process's first pool use: the pool starts on this loop's thread.
        let path = NSTemporaryDirectory() + "reactiveuv-scheduling-probe-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([1])))
        defer { unlink(path) }
        XCTAssertEqual(try Files.stat(path, on: loop).first(timeout: .seconds(10))?.size, 1)
        let loopPolicy = onLoop(loop) { sched_getscheduler(0) }
        let poolPolicy = try ThreadPool.run(on: loop) { sched_getscheduler(0) }.first(timeout: .seconds(10))
        print("scheduling probe: \(uv_available_parallelism()) CPU, loop \(loopPolicy ?? -1) after the first request, pool \(poolPolicy ?? -1)")
    }
}

import CLibUV
import Foundation
import Synchronization
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `ThreadPool.threadScheduling`: libuv's pool threads start under `SCHED_BATCH` on one CPU (or when asked),
/// so a pool thread woken by a loop's request does not switch that loop out, and five nice steps below the
/// loop on several CPUs (or as asked), so it weighs less than the loop where they share one.
final class ThreadPoolSchedulingTests: XCTestCase {
    /// Set in the child process the fresh-process tests start: the scheduling to ask for.
    private static let probeVariable = "REACTIVEUV_POOL_SCHEDULING_PROBE"

    /// In this process (the pool started by this library, `.automatic`): every pool thread a job lands on runs
    /// batch if the process may use one CPU only, five nice steps down under the default policy otherwise; the
    /// loops keep the default policy and nice 0.
    func testPoolThreadsFollowTheAutomaticRule() throws {
        let loop = EventLoop(name: "pool scheduling")
        defer { loop.shutdown() }
        XCTAssertEqual(ThreadPool.threadScheduling, .automatic)
        let oneCPU = uv_available_parallelism() == 1
        let expected = oneCPU ? "\(PoolStartRequest.batchPolicy) nice 0" : "\(SCHED_OTHER) nice 5"
        let jobs = (0..<16).map { _ in
            ThreadPool.run(on: loop) { () -> String in
                usleep(2_000)  // holds the thread, so the next jobs land on the others
                return Self.scheduling()
            }
        }
        let found = try XCTUnwrap(try Signal.merge(jobs).collect().first(timeout: .seconds(20)))
        XCTAssertEqual(found.count, 16)
        XCTAssertEqual(Set(found), [expected], "the pool threads' scheduling: \(found)")
        XCTAssertEqual(onLoop(loop) { Self.scheduling() }, "\(SCHED_OTHER) nice 0")
    }

    /// The calling thread's policy and nice value, as `"0 nice 5"`.
    private static func scheduling() -> String {
        "\(sched_getscheduler(0)) nice \(getpriority(PoolThreads.processWhich, 0))"
    }

    /// A nice increment outside 1...19 is refused with EINVAL before anything else (also after the pool started).
    func testALoweringOutsideOneToNineteenIsEINVAL() {
        for increment: Int32 in [0, -1, 20] {
            XCTAssertThrowsError(try ThreadPool.setThreadScheduling(.lowered(by: increment))) { error in
                let error = error as? UVError
                XCTAssertEqual(error?.name, "EINVAL")
                XCTAssertTrue(error?.message.contains("a nice increment of \(increment) is outside 1...19") == true, "\(String(describing: error))")
                XCTAssertTrue(error?.context.contains("setThreadScheduling(.lowered(by: \(increment)))") == true, "\(String(describing: error))")
            }
        }
        XCTAssertEqual(ThreadPool.threadScheduling, .automatic)
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

    /// In a fresh process allowed one CPU (`taskset -c 0`), `.automatic`: the pool's threads run batch (nice 0), and
    /// the loop that started the pool is back to SCHED_OTHER right after.
    func testOnOneCPUThePoolStartsBatchAndTheLoopKeepsItsPolicy() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        XCTAssertTrue(try runProbe("automatic", oneCPU: true, test: "testOnOneCPUThePoolStartsBatchAndTheLoopKeepsItsPolicy")
            .contains("scheduling probe: 1 CPU, loop 0 nice 0 after the first request, pool 3 nice 0"))
    }

    /// In a fresh process allowed every CPU, `.automatic`: with two or more, the pool's threads five nice steps
    /// below the loop (nice 5), the default policy; the loop unchanged.
    func testOnSeveralCPUsThePoolIsLoweredByFive() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        let cpus = uv_available_parallelism()
        XCTAssertTrue(try runProbe("automatic", oneCPU: false, test: "testOnSeveralCPUsThePoolIsLoweredByFive")
            .contains("scheduling probe: \(cpus) CPU, loop 0 nice 0 after the first request, pool \(cpus == 1 ? "3 nice 0" : "0 nice 5")"))
    }

    /// In a fresh process, `.batch` set before the first use: batch threads whatever the CPUs.
    func testBatchAskedForIsBatchOnAnyNumberOfCPUs() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        XCTAssertTrue(try runProbe("batch", oneCPU: false, test: "testBatchAskedForIsBatchOnAnyNumberOfCPUs")
            .contains("loop 0 nice 0 after the first request, pool 3 nice 0"))
    }

    /// In a fresh process on one CPU, `.lowered(by: 3)` set before the first use: nice 3, the default policy.
    func testALoweringAskedForIsThatNiceValueOnOneCPU() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        XCTAssertTrue(try runProbe("lowered", oneCPU: true, test: "testALoweringAskedForIsThatNiceValueOnOneCPU")
            .contains("scheduling probe: 1 CPU, loop 0 nice 0 after the first request, pool 0 nice 3"))
    }

    /// In a fresh process, `.inherited` set before the first use: the pool's threads take the loop's policy and
    /// nice value, on one CPU and on all of them.
    func testInheritedSchedulingLeavesThePoolAsLibUVMakesIt() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try probeInFreshProcess(probe) }
        for oneCPU in [true, false] {
            XCTAssertTrue(try runProbe("inherited", oneCPU: oneCPU, test: "testInheritedSchedulingLeavesThePoolAsLibUVMakesIt")
                .contains("loop 0 nice 0 after the first request, pool 0 nice 0"), "one CPU: \(oneCPU)")
        }
    }

    /// Two loops making the process's first pool use at once: the loop that claimed the first use is held
    /// just before its start request while the other loop's job runs. That job still lands on a pool started
    /// as asked (batch, or five nice steps down on several CPUs), not on threads libuv made from the other
    /// loop's thread as it is; in a fresh process, both with `.batch` and with `.automatic`.
    func testALoopRacingTheFirstUseStillGetsThePoolAsAsked() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try raceInFreshProcess(probe) }
        let cpus = uv_available_parallelism()
        let batch = try runProbe("race batch", oneCPU: false, test: "testALoopRacingTheFirstUseStillGetsThePoolAsAsked")
        XCTAssertTrue(batch.contains("race probe: the second loop's job ran 3 nice 0, the first loop's 3 nice 0"), batch)
        let lowered = cpus == 1 ? "3 nice 0" : "0 nice 5"
        let automatic = try runProbe("race automatic", oneCPU: false, test: "testALoopRacingTheFirstUseStillGetsThePoolAsAsked")
        XCTAssertTrue(automatic.contains("race probe: the second loop's job ran \(lowered), the first loop's \(lowered)"), automatic)
    }

    private func raceInFreshProcess(_ probe: String) throws {
        if probe == "race batch" { try ThreadPool.setThreadScheduling(.batch) }
        let first = EventLoop(name: "first claim")
        let second = EventLoop(name: "second")
        defer {
            first.shutdown()
            second.shutdown()
        }
        let firstClaimed = DispatchSemaphore(value: 0)
        let secondDone = DispatchSemaphore(value: 0)
        PoolUse.beforeStartForTesting.withLock { hook in
            hook = { loop in
                guard loop === first else { return }
                firstClaimed.signal()
                secondDone.wait()
            }
        }
        defer { PoolUse.beforeStartForTesting.withLock { $0 = nil } }
        // The first loop's job, waited for on a thread of its own: its loop stays held until the second's ran.
        let firstResult = Mutex<String?>(nil)
        let firstFinished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let scheduling = try? ThreadPool.run(on: first) { Self.scheduling() }.first(timeout: .seconds(20))
            firstResult.withLock { $0 = scheduling }
            firstFinished.signal()
        }
        XCTAssertEqual(firstClaimed.wait(timeout: .now() + 20), .success, "the first loop claimed the first use")
        let secondScheduling = try ThreadPool.run(on: second) { Self.scheduling() }.first(timeout: .seconds(20))
        secondDone.signal()
        XCTAssertEqual(firstFinished.wait(timeout: .now() + 20), .success)
        print("race probe: the second loop's job ran \(secondScheduling ?? "?"), the first loop's \(firstResult.withLock { $0 } ?? "?")")
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
        case "lowered": try ThreadPool.setThreadScheduling(.lowered(by: 3))
        default: XCTAssertEqual(ThreadPool.threadScheduling, .automatic)
        }
        let loop = EventLoop(name: "probe")
        defer { loop.shutdown() }
        // The file request is the process's first pool use: the pool starts on this loop's thread.
        let path = NSTemporaryDirectory() + "reactiveuv-scheduling-probe-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([1])))
        defer { unlink(path) }
        XCTAssertEqual(try Files.stat(path, on: loop).first(timeout: .seconds(10))?.size, 1)
        let loopScheduling = onLoop(loop) { Self.scheduling() }
        let poolScheduling = try ThreadPool.run(on: loop) { Self.scheduling() }.first(timeout: .seconds(10))
        print("scheduling probe: \(uv_available_parallelism()) CPU, loop \(loopScheduling ?? "?") after the first request, pool \(poolScheduling ?? "?")")
    }
}

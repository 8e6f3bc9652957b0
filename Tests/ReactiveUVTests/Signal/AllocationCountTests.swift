import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Swift heap objects made per operation on the thread that does the work (`swift_allocObject`,
/// interposed by CTestSupport): the allocation figures BENCHMARKS.md's targets name, held by a test.
final class AllocationCountTests: XCTestCase {
    /// Objects `body` makes on the calling thread, per each of `count` repetitions, after a warm-up.
    private func objects(per count: Int, _ body: () -> Void) -> Double {
        body()
        ruv_test_count_objects_start(0)
        for _ in 0..<count { body() }
        return Double(ruv_test_count_objects_stop()) / Double(count)
    }

    func testTheCounterSeesAnObjectMadeOnThisThread() {
        final class Probe {}
        let made = objects(per: 100) { withExtendedLifetime(Probe()) {} }
        XCTAssertEqual(made, 1, "one class instance per repetition")
    }

    /// subscribe(next:) + dispose on a subject, on its loop thread: one object, the subscription (target: at most two).
    func testSubscribeAndDisposeMakesOneObjectPerCycle() {
        LoopHarness.run { harness in
            let made = try harness.onLoop { () -> Double in
                let subject = Subject<Int>()
                return self.objects(per: 1_000) { subject.subscribeNext { _ in }.dispose() }
            }
            XCTAssertLessThanOrEqual(made, 2, "subscribe + dispose made \(made) objects per cycle")
            XCTAssertEqual(made, 1, "the SinkSubscription alone")
        }
    }

    /// A value through map, filter and scan to a subscriber makes nothing.
    func testAValueThroughAnOperatorChainMakesNoObject() {
        LoopHarness.run { harness in
            let made = try harness.onLoop { () -> Double in
                let subject = Subject<Int>()
                let total = Locked(0)
                let subscription = subject.map { $0 * 3 }.filter { $0 % 2 == 0 }.scan(0) { $0 &+ $1 }.subscribeNext { value in
                    total.withLock { $0 = value }
                }
                var value = 0
                let made = self.objects(per: 10_000) {
                    subject.sendNext(value)
                    value += 1
                }
                subscription.dispose()
                XCTAssertGreaterThan(total.withLock { $0 }, 0)
                return made
            }
            XCTAssertEqual(made, 0, "objects per value")
        }
    }

    /// `Files.stat` subscribed with callbacks on its loop makes three class instances: the signal, its
    /// subscription and its operation (closure contexts left out: an unoptimized build boxes some).
    func testAStatOnItsLoopMakesThreeObjects() throws {
        let path = NSTemporaryDirectory() + "reactiveuv-allocations-" + UUID().uuidString
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])))
        defer { unlink(path) }
        LoopHarness.run { harness in
            // The first request starts libuv's pool (objects made once): not counted.
            XCTAssertEqual(try Files.stat(path, on: harness.loop).last()?.size, 3)
            let chains = StatChains(path: path, count: 2_000)
            try harness.onLoop { chains.start(inflight: 8) }
            try harness.wait(for: "2,000 stats") { chains.result.withLock { $0 != nil } }
            let (made, failures) = try XCTUnwrap(chains.result.withLock { $0 })
            XCTAssertEqual(failures, 0)
            XCTAssertEqual(made, 3, "objects per stat: \(made)")
        }
    }
}

/// `count` stats, `inflight` at a time, each started from the completion of the one before on the loop
/// thread; the class instances the loop thread makes are counted from the first start to the last completion.
private final class StatChains: @unchecked Sendable {
    // Loop thread only, except `result` (locked).
    let path: String
    var remaining: Int
    let count: Int
    var pending = 0
    var failures = 0
    let result = Locked<(objectsPerStat: Double, failures: Int)?>(nil)

    init(path: String, count: Int) {
        self.path = path
        self.count = count
        remaining = count
    }

    func start(inflight: Int) {
        ruv_test_count_objects_start(1)
        for _ in 0..<inflight { next() }
    }

    private func next() {
        remaining -= 1
        pending += 1
        _ = Files.stat(path).subscribe(next: { [self] info in
            if info.size != 3 { failures += 1 }
        }, error: { [self] _ in
            failures += 1
            finish()
        }, completed: { [self] in
            finish()
        })
    }

    private func finish() {
        pending -= 1
        if remaining > 0 {
            next()
        } else if pending == 0 {
            let made = ruv_test_count_objects_stop()
            let failures = failures
            let count = count
            result.withLock { $0 = (Double(made) / Double(count), failures) }
        }
    }
}

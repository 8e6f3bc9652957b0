import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `retry(upTo:backoff:resetting:while:)` on virtual time: waits exact to the millisecond with a
/// scripted or seeded jitter, the maximum, the reset after a success, the predicate, disposal.
final class RetryBackoffTests: XCTestCase {
    private let fails = events((10, Event<Int>.error(TestError())))

    func testWaitsGrowToTheMaximumAndLoseTheirRandomPartExactly() {
        let test = TestScheduler()
        let source = AttemptSource(fails)
        // Fractions 0, 0.5, 0.25, 0.5, 0 of a jitter of 0.5 take 0, 25, 12.5, 25 and 0 % off
        // the waits 100, 200, 400, 500 (800 capped), 500 (1600 capped).
        let backoff = Backoff.exponential(initial: .milliseconds(100), multiplier: 2, maximum: .milliseconds(500), jitter: 0.5,
                                          using: ScriptedRandom([0, 0.5, 0.25, 0.5, 0]))
        let recorder = test.record(source.signal.retry(upTo: 5, backoff: backoff))
        test.run()
        // Waits of 100, 150, 350, 375 and 500 ms after the failures at 10, 120, 280, 640 and 1025.
        XCTAssertEqual(source.starts, [0, 110, 270, 630, 1015, 1525])
        XCTAssertEqual(recorder.timeline, ["error(boom)@1535"], "the failure after 5 retries in a row is forwarded")
    }

    func testTheMaximumHoldsHoweverManyRetriesAndAZeroDelayNeverTraps() {
        let test = TestScheduler()
        let source = AttemptSource(events((0, Event<Int>.error(TestError()))))
        let recorder = test.record(source.signal.retry(upTo: 40, backoff: .exponential(initial: .milliseconds(1), maximum: .seconds(1), jitter: 0)))
        test.run()
        // 1, 2, 4 ... 512 ms (1,023 in all), then 30 waits of the maximum.
        XCTAssertEqual(recorder.timeline, ["error(boom)@31023"])
        XCTAssertEqual(source.starts.count, 41)

        // A zero delay doubled past 2^1024 (infinite as a Double) stays zero.
        let attempts = Locked(0)
        let failing = Signal<Int> { subscriber in
            attempts.withLock { $0 += 1 }
            subscriber.sendError(TestError())
            return nil
        }
        XCTAssertEqual(TestScheduler().record(failing.retry(upTo: 1_100, delay: .zero, backoff: 2)).events, [.error(TestError())])
        XCTAssertEqual(attempts.current, 1_101)
    }

    func testAnAttemptThatSentAValueStartsTheWaitsAndTheCountOver() {
        let sentAValue = events((5, .next(1)), (10, Event<Int>.error(TestError())))
        let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(10), jitter: 0)
        // The third attempt sends a value: its failure waits 100 ms again, and two more failures in a row are allowed.
        let test = TestScheduler()
        let source = AttemptSource(fails, fails, sentAValue, fails)
        let recorder = test.record(source.signal.retry(upTo: 2, backoff: backoff))
        test.run()
        XCTAssertEqual(source.starts, [0, 110, 320, 430, 640])
        XCTAssertEqual(recorder.timeline, ["next(1)@325", "error(boom)@650"])
        // Without the reset, that failure is the third in a row and is forwarded.
        let never = TestScheduler()
        let counted = AttemptSource(fails, fails, sentAValue, fails)
        let forwarded = never.record(counted.signal.retry(upTo: 2, backoff: backoff, resetting: .never))
        never.run()
        XCTAssertEqual(counted.starts, [0, 110, 320])
        XCTAssertEqual(forwarded.timeline, ["next(1)@325", "error(boom)@330"])
    }

    func testResettingAfterLastingCountsOnlyAnAttemptThatLastedThatLong() {
        let short = events((5, .next(1)), (10, Event<Int>.error(TestError())))
        let long = events((60, Event<Int>.error(TestError())))
        let test = TestScheduler()
        let source = AttemptSource(fails, short, long, fails)
        let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(10), jitter: 0)
        let recorder = test.record(source.signal.retry(upTo: 3, backoff: backoff, resetting: .afterLasting(.milliseconds(50))))
        test.run()
        // A value in a 10 ms attempt is no success; the 60 ms attempt is: 100 ms again after it.
        XCTAssertEqual(source.starts, [0, 110, 320, 480, 690, 1100])
        XCTAssertEqual(recorder.timeline, ["next(1)@115", "error(boom)@1110"])
    }

    func testThePredicateDecidesWhichErrorsAreRetried() {
        let test = TestScheduler()
        let source = AttemptSource(events((10, Event<Int>.error(UVError.connectionRefused))), events((10, Event<Int>.error(UVError.nameNotFound))))
        let asked = Locked<[String]>([])
        let recorder = test.record(source.signal.retry(backoff: .constant(.milliseconds(100))) { error in
            asked.withLock { $0.append((error as? UVError)?.name ?? "\(error)") }
            return (error as? UVError) != .nameNotFound
        })
        test.run()
        XCTAssertEqual(source.starts, [0, 110])
        XCTAssertEqual(recorder.timeline, ["error(\(UVError.nameNotFound))@120"])
        XCTAssertEqual(asked.current, [UVError.connectionRefused.name, UVError.nameNotFound.name])
    }

    func testDisposingDuringAWaitCancelsItAndAnAttemptsCompletionEndsTheSignal() {
        let test = TestScheduler()
        let source = AttemptSource(events((5, .next(1)), (10, Event<Int>.error(TestError()))))
        let recorder = test.record(source.signal.retry(backoff: .constant(.milliseconds(100))))
        test.advance(by: .milliseconds(50))
        test.performAsCurrent { recorder.dispose() }  // on the home thread: the teardown runs now
        XCTAssertEqual(test.run(), 0, "the wait's timer was cancelled")
        XCTAssertEqual(source.starts, [0])
        XCTAssertEqual(recorder.timeline, ["next(1)@5"])

        let completing = TestScheduler()
        let flaky = AttemptSource(fails, events((5, .next(2)), (10, Event<Int>.completed)))
        let completed = completing.record(flaky.signal.retry(backoff: .constant(.milliseconds(100))))
        completing.run()
        XCTAssertEqual(completed.timeline, ["next(2)@115", "completed@120"])
        assertPropagatesErrorAndDisposal("retry(backoff:)") { $0.retry(backoff: .constant(.seconds(1)), while: { _ in false }) }
        assertFinishedPipelineIsFreed("retry(backoff:)") { signal, token in
            signal.retry(backoff: .constant(.milliseconds(1))).map { value -> Int in token.touch(); return value }
        }
    }

    /// Each subscription draws from its own copy of the generator: a seed replays the same
    /// waits, another seed gives others, and every wait stays within its jitter's range.
    func testASeededGeneratorGivesEachSubscriptionTheSameWaitsWithinTheJittersRange() {
        func waits(seed: UInt64, subscriptions: Int = 1) -> [[Int64]] {
            let test = TestScheduler()
            let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(1), jitter: 0.5,
                                              using: SeededRandomNumberGenerator(seed: seed))
            let sources = (0..<subscriptions).map { _ in AttemptSource(events((10, Event<Int>.error(TestError())))) }
            let retried = sources.map { test.record($0.signal.retry(upTo: 6, backoff: backoff)) }
            test.run()
            XCTAssertTrue(retried.allSatisfy { $0.terminal == .error(TestError()) })
            return sources.map { source in
                zip(source.startNanoseconds, source.startNanoseconds.dropFirst()).map { Int64($1 - $0) - 10_000_000 }
            }
        }
        let first = waits(seed: 7, subscriptions: 2)
        XCTAssertEqual(first[0], first[1], "two subscriptions of one backoff draw the same waits")
        XCTAssertEqual(waits(seed: 7)[0], first[0], "a seed replays its waits")
        XCTAssertNotEqual(waits(seed: 8)[0], first[0], "another seed draws others")
        let full: [Int64] = [100, 200, 400, 800, 1_000, 1_000].map { $0 * 1_000_000 }
        for (wait, whole) in zip(first[0], full) {
            XCTAssertTrue((whole / 2...whole).contains(wait), "\(wait) ns is outside [\(whole / 2), \(whole)]: \(first[0])")
        }
    }

    func testSubscribeOnMovesTheWaitsToThatSchedulersClock() {
        let home = TestScheduler(), other = TestScheduler()
        let source = AttemptSource(fails)
        let recorder = home.record(source.signal.retry(upTo: 2, backoff: .constant(.milliseconds(100))).subscribe(on: other))
        home.run()
        XCTAssertEqual(source.starts, [], "nothing is subscribed until the other scheduler runs")
        other.run()
        XCTAssertEqual(source.starts, [0, 110, 220])
        XCTAssertEqual(recorder.timeline, ["error(boom)@230"])
        XCTAssertEqual(home.now.nanoseconds, 0, "the home's clock did not move")
    }

    func testOnALoopRefusedConnectionsAreRetriedAfterTheLoopsTimers() throws {
        let port = try unusedPort()
        let attempts = Locked(0)
        let report = LoopHarness.run { harness in
            let connect = Signal.defer {
                attempts.withLock { $0 += 1 }
                return TCP.connect(host: "127.0.0.1", port: port)
            }
            let start = SchedulerInstant.now
            let recorder = try harness.record(connect.retry(upTo: 3, backoff: .exponential(initial: .milliseconds(10), maximum: .seconds(1), jitter: 0)))
            XCTAssertEqual(try recorder.waitForTermination().error as? UVError, .connectionRefused)
            XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(70), "waits of 10, 20 and 40 ms")
        }
        XCTAssertEqual(attempts.current, 4)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// A source on virtual time whose n-th subscription sends the n-th script (the last one again
/// after that), at offsets in milliseconds from that subscription; it logs when each began.
private final class AttemptSource: @unchecked Sendable {
    // `scripts` is immutable; `log` is locked.
    private let scripts: [[(Int, Event<Int>)]]
    private let log = Locked<[UInt64]>([])

    init(_ scripts: [(Int, Event<Int>)]...) {
        self.scripts = scripts
    }

    /// When each subscription began, in virtual nanoseconds.
    var startNanoseconds: [UInt64] { log.current }

    /// When each subscription began, in virtual milliseconds.
    var starts: [Int] { log.current.map { Int($0 / 1_000_000) } }

    var signal: Signal<Int> {
        Signal { [self] subscriber in
            let home = subscriber.homeScheduler
            let script = log.withLock { log -> [(Int, Event<Int>)] in
                log.append(home.now.nanoseconds)
                return scripts[min(log.count - 1, scripts.count - 1)]
            }
            let pending = CompoundDisposable()
            sendScript(script, to: subscriber, on: home, pending: pending)
            return pending
        }
    }
}

/// Draws the given fractions of the unit interval in turn, so each jittered wait is known exactly.
private struct ScriptedRandom: RandomNumberGenerator, Sendable {
    // A value, copied into each subscription.
    private let fractions: [Double]
    private var drawn = 0

    init(_ fractions: [Double]) {
        self.fractions = fractions
    }

    mutating func next() -> UInt64 {
        defer { drawn += 1 }
        return UInt64(fractions[drawn % fractions.count] * 0x1p64)
    }
}

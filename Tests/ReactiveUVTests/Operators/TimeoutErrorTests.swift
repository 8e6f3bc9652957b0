import ReactiveUV
import ReactiveUVTesting
import XCTest

/// One timeout error type: the `timeout` operator, the blocking waits and the test harness's waits.
final class TimeoutErrorTests: XCTestCase {
    func testTheOperatorTheBlockingWaitsAndTheHarnessWaitsShareOneTimeoutType() throws {
        let test = TestScheduler()
        let recorder = test.record(Signal<Int>.never.timeout(.milliseconds(30)))
        test.run()
        XCTAssertEqual(try timeoutCaught { if let error = recorder.terminal?.error { throw error } },
                       TimeoutError(operation: "the signal to end (timeout operator)", after: .milliseconds(30)))
        XCTAssertEqual(recorder.terminal?.error as? TimeoutError, .timeoutOperator(after: .milliseconds(30)))

        let wait = Duration.milliseconds(20)
        XCTAssertEqual(try timeoutCaught { _ = try Signal<Int>.never.first(timeout: wait) },
                       TimeoutError(operation: "first()", after: wait))
        XCTAssertEqual(try timeoutCaught { _ = try Signal<Int>.never.last(timeout: wait) },
                       TimeoutError(operation: "last()", after: wait))
        XCTAssertEqual(try timeoutCaught { try Signal<Int>.never.waitUntilCompleted(timeout: wait) },
                       TimeoutError(operation: "waitUntilCompleted()", after: wait))

        LoopHarness.run { harness in
            let silent = try harness.record(Signal<Int>.never, label: "the silent signal")
            let error = try timeoutCaught { _ = try silent.waitForValues(1, timeout: wait) }
            XCTAssertEqual(error.operation, "1 value(s) from the silent signal")
            XCTAssertEqual(error.timeout, wait)
            XCTAssertEqual(error.observed, "0 event(s): []")
            let flag = try timeoutCaught { try harness.wait(for: "a flag that is never set", timeout: wait) { false } }
            XCTAssertEqual(flag.operation, "a flag that is never set")
        }
    }

    func testTheDescriptionSaysWhatTimedOutAfterHowLongAndWhatWasSeen() {
        XCTAssertEqual("\(TimeoutError(operation: "first()", after: .seconds(1)))", "timed out after 1.0 seconds waiting for first()")
        XCTAssertEqual("\(TimeoutError.timeoutOperator(after: .milliseconds(30)))",
                       "timed out after 0.03 seconds waiting for the signal to end (timeout operator)")
        XCTAssertEqual("\(TimeoutError(operation: "3 value(s) from ticks", after: .seconds(5), observed: "[next(0)]"))",
                       "timed out after 5.0 seconds waiting for 3 value(s) from ticks; observed: [next(0)]")
        XCTAssertNotEqual(TimeoutError(operation: "first()", after: .seconds(1)), TimeoutError(operation: "last()", after: .seconds(1)))
        XCTAssertNotEqual(TimeoutError(operation: "first()", after: .seconds(1)), TimeoutError(operation: "first()", after: .seconds(2)))
    }

    /// `SignalError`, `SignalWaitError` and `WaitTimeout` are names of `TimeoutError` now; their
    /// old constructors still build (and match) the errors the library sends.
    @available(*, deprecated, message: "exercises the deprecated spellings on purpose")
    func testTheOldSpellingsStillBuildAndMatchTheNewErrors() throws {
        let test = TestScheduler()
        let recorder = test.record(Signal<Int>.never.timeout(.milliseconds(30)))
        test.run()
        XCTAssertEqual(recorder.terminal, .error(SignalError.timedOut(after: .milliseconds(30))))

        var matched = false
        do {
            _ = try Signal<Int>.never.first(timeout: .milliseconds(20))
        } catch SignalWaitError.timedOut(operation: "first()", after: .milliseconds(20)) {
            matched = true
        }
        XCTAssertTrue(matched, "catch SignalWaitError.timedOut(operation:after:) no longer matches")

        let harnessError = WaitTimeout(waitingFor: "completion", timeout: .seconds(1), observed: "nothing")
        XCTAssertEqual(harnessError.waitingFor, "completion")
        XCTAssertEqual(harnessError, TimeoutError(operation: "completion", after: .seconds(1), observed: "nothing"))
    }

    /// The `TimeoutError` `body` threw; any other outcome fails.
    private func timeoutCaught(_ body: () throws -> Void) throws -> TimeoutError {
        do {
            try body()
        } catch let error as TimeoutError {
            return error
        }
        throw TestFailure("nothing was thrown")
    }
}

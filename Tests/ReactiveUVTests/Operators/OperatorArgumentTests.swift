import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Bad arguments to operators: an error event `EINVAL` naming the argument, never a trap, and the source is not subscribed.
final class OperatorArgumentTests: XCTestCase {
    private func assertInvalid<Output>(
        _ what: String, mentioning words: String, file: StaticString = #filePath, line: UInt = #line,
        _ apply: (Signal<Int>) -> Signal<Output>
    ) {
        let source = TestSource<Int>(events((0, .next(1)), (0, .completed)))
        let recorder = TestScheduler().record(apply(source.signal))
        guard recorder.events.count == 1, case .error(let error as UVError)? = recorder.terminal else {
            return XCTFail("\(what): expected one UVError, got \(recorder.events)", file: file, line: line)
        }
        XCTAssertEqual(error, .invalidArgument, "\(what): \(error)", file: file, line: line)
        XCTAssertEqual(error.name, "EINVAL", file: file, line: line)
        XCTAssertTrue(error.message.contains(words), "\(what): \(error.message)", file: file, line: line)
        XCTAssertEqual(source.subscriptionCount, 0, "\(what): the source must not be subscribed", file: file, line: line)
    }

    func testANonPositiveCountIsEINVAL() {
        assertInvalid("collect(count: 0)", mentioning: "count must be positive, got 0") { $0.collect(count: 0) }
        assertInvalid("collect(count: -3)", mentioning: "got -3") { $0.collect(count: -3) }
        assertInvalid("buffer(count: 0)", mentioning: "count must be positive") { $0.buffer(count: 0) }
    }

    func testANonPositiveIntervalIsEINVAL() {
        assertInvalid("debounce(.zero)", mentioning: "debounce interval must be positive") { $0.debounce(.zero) }
        assertInvalid("throttle(-1 ms, latest: true)", mentioning: "throttle interval must be positive") {
            $0.throttle(.milliseconds(-1), latest: true)
        }
        assertInvalid("throttle(.zero, latest: false)", mentioning: "throttle interval must be positive") { $0.throttle(.zero, latest: false) }
        assertInvalid("timeout(idle: .zero)", mentioning: "idle timeout interval must be positive") { $0.timeout(idle: .zero) }
    }

    func testBadRetryArgumentsAreEINVAL() {
        assertInvalid("retry(upTo: -1)", mentioning: "count must not be negative") { $0.retry(upTo: -1) }
        assertInvalid("retry delay -1 ms", mentioning: "delay must not be negative") { $0.retry(upTo: 1, delay: .milliseconds(-1)) }
        for backoff in [0.5, 0, -2, .nan, .infinity] {
            assertInvalid("retry backoff \(backoff)", mentioning: "backoff must be a finite factor of at least 1") {
                $0.retry(upTo: 1, delay: .milliseconds(1), backoff: backoff)
            }
        }
    }

    func testABatchOfNoValuesOrNoTimeIsEINVAL() {
        assertInvalid("buffer(every: 1 s, count: 0)", mentioning: "buffer count must be positive, got 0") {
            $0.buffer(every: .seconds(1), count: 0)
        }
        assertInvalid("buffer(every: 1 s, count: -2)", mentioning: "got -2") { $0.buffer(every: .seconds(1), count: -2) }
        assertInvalid("buffer(every: .zero, count: 5)", mentioning: "buffer interval must be positive, got 0") {
            $0.buffer(every: .zero, count: 5)
        }
        assertInvalid("buffer(every: -1 ms, count: 5)", mentioning: "buffer interval must be positive") {
            $0.buffer(every: .milliseconds(-1), count: 5)
        }
        assertInvalid("buffer(every: .zero)", mentioning: "buffer interval must be positive") { $0.buffer(every: .zero) }
    }

    func testBadBackoffArgumentsAreEINVAL() {
        let second = Duration.seconds(1)
        assertInvalid("a negative first delay", mentioning: "backoff delay must not be negative") {
            $0.retry(backoff: .exponential(initial: .milliseconds(-1), maximum: second))
        }
        assertInvalid("a negative constant delay", mentioning: "backoff delay must not be negative") {
            $0.retry(backoff: .constant(.nanoseconds(-1)))
        }
        assertInvalid("a maximum below the first delay", mentioning: "backoff maximum must not be below the initial delay") {
            $0.retry(backoff: .exponential(initial: .seconds(2), maximum: second))
        }
        for multiplier in [0.5, 0, -2, .nan, .infinity] {
            assertInvalid("multiplier \(multiplier)", mentioning: "backoff multiplier must be a finite factor of at least 1") {
                $0.retry(backoff: .exponential(initial: .milliseconds(1), multiplier: multiplier, maximum: second))
            }
        }
        for jitter in [-0.1, 1.5, .nan, .infinity] {
            assertInvalid("jitter \(jitter)", mentioning: "backoff jitter must be a fraction from 0 to 1") {
                $0.retry(backoff: .exponential(initial: .milliseconds(1), maximum: second, jitter: jitter))
            }
        }
        assertInvalid("retry(upTo: -1, backoff:)", mentioning: "retry count must not be negative") {
            $0.retry(upTo: -1, backoff: .constant(second))
        }
        assertInvalid("a negative reset duration", mentioning: "retry reset duration must not be negative") {
            $0.retry(backoff: .constant(second), resetting: .afterLasting(.milliseconds(-1)))
        }
    }
}

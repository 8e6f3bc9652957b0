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
}

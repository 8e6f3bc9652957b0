import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the README's "Operators" example compiling and runs it.
final class ReadmeOperatorsExampleTests: XCTestCase {
    func testTheReadmeOperatorsExampleIsThisCodeAndWorks() throws {
        try assertReadmeBlock(containing: "Lifetime.make()", matches: "README-OPERATORS-EXAMPLE")
        // README-OPERATORS-EXAMPLE-BEGIN
        // A missing file is final; any other error is retried 3 times, 50, 100 and 200 ms apart.
        let settings = Files.read("/etc/reactiveuv-example/settings.json")
            .retry(upTo: 3, delay: .milliseconds(50), backoff: 2, while: { ($0 as? UVError) != .noSuchFile })

        // At most one progress line per 100 ms, the newest; it stops when the job's token goes.
        let (lifetime, token) = Lifetime.make()
        let progress = Signal<Int>.interval(.milliseconds(10))
            .take(during: lifetime)
            .throttle(.milliseconds(100), latest: true)
            .map { "progress \($0)" }
        // README-OPERATORS-EXAMPLE-END

        XCTAssertThrowsError(try settings.first(timeout: .seconds(5))) { error in
            XCTAssertEqual(error as? UVError, .noSuchFile, "a missing file is not retried: \(error)")
        }
        let report = LoopHarness.run { harness in
            let lines = try harness.record(progress)
            try lines.waitForValues(2)
            token.dispose()
            XCTAssertEqual(try lines.waitForTermination(), .completed)
            XCTAssertEqual(lines.values.first, "progress 0", "the first tick goes at once")
            let times = lines.recorded.filter { !$0.event.isTerminating }.map(\.time.nanoseconds)
            for (earlier, later) in zip(times, times.dropFirst()) {
                XCTAssertGreaterThanOrEqual(later - earlier, 99_000_000, "two lines less than 100 ms apart: \(lines.timeline)")
            }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

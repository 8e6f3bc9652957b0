import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Checks that an operator over one source forwards the source's error at
/// once and that disposing the result disposes the source, on virtual time.
func assertPropagatesErrorAndDisposal<Output>(
    _ name: String,
    file: StaticString = #filePath,
    line: UInt = #line,
    forwardsError: Bool = true,
    _ apply: (Signal<Int>) -> Signal<Output>
) {
    // Error: the source fails at 20 ms; the result fails then too and the source is torn down.
    do {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .error(TestError("e"))), (30, .next(9))))
        let recorder = test.record(apply(source.signal))
        test.run()
        if forwardsError {
            XCTAssertEqual(recorder.recorded.last.map { "\($0.event)@\($0.time.nanoseconds / 1_000_000)" }, "error(e)@20",
                           "\(name): the source's error must end the result at once", file: file, line: line)
        }
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"], "\(name): the failed source must be disposed",
                       file: file, line: line)
    }
    // Disposal: disposing the result at 15 ms disposes the source, and nothing arrives afterwards.
    do {
        let test = TestScheduler()
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .completed)))
        let recorder = test.record(apply(source.signal))
        test.at(15) { recorder.dispose() }
        test.run()
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@15"], "\(name): disposing the result must dispose the source",
                       file: file, line: line)
        XCTAssertTrue(recorder.recorded.allSatisfy { $0.time.nanoseconds <= 15_000_000 },
                      "\(name): an event arrived after dispose: \(recorder.timeline)", file: file, line: line)
    }
}

/// Checks that a finished pipeline frees what its closures captured: `build`
/// gets a token to capture in the operator's closures; the token must be
/// alive while the subscription runs and freed once the source completed.
func assertFinishedPipelineIsFreed<Output>(
    _ name: String,
    file: StaticString = #filePath,
    line: UInt = #line,
    _ build: (Signal<Int>, LifetimeToken) -> Signal<Output>
) {
    let test = TestScheduler()
    weak var weakToken: LifetimeToken?
    var recorder: EventRecorder<Output>?
    do {
        let token = LifetimeToken()
        weakToken = token
        let source = TestSource<Int>(events((10, .next(1)), (20, .next(2)), (30, .completed)))
        recorder = test.record(build(source.signal, token))
    }
    test.advance(by: .milliseconds(15))
    XCTAssertNotNil(weakToken, "\(name): the token should be alive while subscribed", file: file, line: line)
    test.run()
    XCTAssertEqual(recorder?.terminal.map { "\($0)" }, "completed", "\(name): \(recorder?.timeline ?? [])", file: file, line: line)
    XCTAssertNil(weakToken, "\(name): a finished pipeline still holds what its closures captured", file: file, line: line)
}

/// An object whose lifetime a test watches.
final class LifetimeToken: @unchecked Sendable {
    // No state.
    func touch() {}
}

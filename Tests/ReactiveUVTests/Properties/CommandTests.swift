import ReactiveUV
import ReactiveUVTesting
import XCTest

final class CommandTests: XCTestCase {
    /// A command whose execution sends input × 10 after 10 ms and completes after 20 ms.
    private func makeCommand(on test: TestScheduler, concurrent: Bool = false, enabledIf: Signal<Bool>? = nil) -> Command<Int, Int> {
        Command(enabledIf: enabledIf, allowsConcurrentExecution: concurrent, on: test) { input in
            TestSource<Int>(events((10, .next(input * 10)), (20, .completed))).signal
        }
    }

    func testExecuteRunsOnceAndReplaysToEverySubscriber() {
        let test = TestScheduler()
        let command = makeCommand(on: test)
        let executing = test.record(command.executing)
        let signals = test.record(command.executionSignals.flatMap { $0 })
        let result = test.performAsCurrent { command.execute(4) }
        test.advance(by: .milliseconds(15))
        let first = test.record(result)
        test.run()
        let late = test.record(result)
        XCTAssertEqual(first.timeline, ["next(40)@15", "completed@20"])
        XCTAssertEqual(late.events, [.next(40), .completed], "the execution is shared and replayed")
        XCTAssertEqual(signals.values, [40])
        XCTAssertEqual(executing.timeline, ["next(false)@0", "next(true)@0", "next(false)@20"])
    }

    func testADisabledCommandRefusesToExecute() {
        let test = TestScheduler()
        let command = makeCommand(on: test)
        let enabled = test.record(command.enabled)
        _ = test.performAsCurrent { command.execute(1) }
        let refused = test.record(test.performAsCurrent { command.execute(2) })
        XCTAssertEqual(refused.events, [.error(CommandError.notEnabled)], "no concurrent execution by default")
        test.run()
        XCTAssertEqual(enabled.timeline, ["next(true)@0", "next(false)@0", "next(true)@20"])
        let again = test.record(test.performAsCurrent { command.execute(3) })
        test.run()
        XCTAssertEqual(again.values, [30])
    }

    func testConcurrentExecutionWhenAllowed() {
        let test = TestScheduler()
        let command = makeCommand(on: test, concurrent: true)
        let enabled = test.record(command.enabled)
        let a = test.record(test.performAsCurrent { command.execute(1) })
        let b = test.record(test.performAsCurrent { command.execute(2) })
        test.run()
        XCTAssertEqual(a.values, [10])
        XCTAssertEqual(b.values, [20])
        XCTAssertEqual(enabled.values, [true])
        XCTAssertTrue(command.allowsConcurrentExecution)
    }

    func testEnabledIfGatesExecution() {
        let test = TestScheduler()
        let gate = BehaviorSubject(initial: false)
        let command = test.performAsCurrent { makeCommand(on: test, enabledIf: gate) }
        let enabled = test.record(command.enabled)
        test.run()
        XCTAssertEqual(test.record(test.performAsCurrent { command.execute(1) }).events, [.error(CommandError.notEnabled)])
        test.performAsCurrent { gate.sendNext(true) }
        test.run()
        let run = test.record(test.performAsCurrent { command.execute(1) })
        test.run()
        XCTAssertEqual(run.values, [10])
        XCTAssertEqual(enabled.values, [false, true, false, true], "disabled by the gate from the start, then by the running execution")
    }

    func testErrorsAreSentOnTheErrorsSignalAndExecutionSignalsNeverFail() {
        let test = TestScheduler()
        let command = Command<Int, Int>(on: test) { _ in
            TestSource<Int>(events((5, .error(TestError("failed"))))).signal
        }
        let errors = test.record(command.errors.map { "\($0)" })
        let signals = test.record(command.executionSignals.flatMap { $0.materialize() })
        let result = test.record(test.performAsCurrent { command.execute(0) })
        test.run()
        XCTAssertEqual(result.events, [.error(TestError("failed"))])
        XCTAssertEqual(errors.timeline, ["next(failed)@5"])
        XCTAssertEqual(signals.values.map { "\($0)" }, ["completed"], "executionSignals carry completion instead of the error")
        XCTAssertEqual(test.record(command.executing).values, [false])
    }
}

import Foundation
import XCTest

/// Callbacks that run on a loop thread cannot touch the caller's isolated state: the compiler says so.
///
/// Each test compiles a small program against the modules just built and
/// checks the diagnostics (a `@MainActor` program that mutated its state from
/// `next:` must not compile: it would race with the loop thread).
final class SendabilityDiagnosticsTests: XCTestCase {
    /// Every line marked `// expect: TEXT` gets an error containing TEXT, and no other line gets one.
    private func assertDiagnostics(_ source: String, fileName: String = "snippet.swift",
                                   file: StaticString = #filePath, line: UInt = #line) throws {
        let compiler = try SnippetCompiler()
        let outcome = try compiler.compile(source, fileName: fileName)
        let expected = SnippetCompiler.expectations(in: source)
        XCTAssertFalse(expected.isEmpty, "the snippet marks no expected error", file: file, line: line)
        XCTAssertNotEqual(outcome.status, 0, "the snippet compiled; compiler output:\n\(outcome.output)", file: file, line: line)
        for (number, text) in expected where !outcome.errors.contains(where: { $0.line == number && $0.message.contains(text) }) {
            XCTFail("no error containing '\(text)' on line \(number); errors: \(outcome.errors)", file: file, line: line)
        }
        let unexpected = outcome.errors.filter { error in !expected.contains { $0.line == error.line } }
        XCTAssertTrue(unexpected.isEmpty, "errors on unmarked lines: \(unexpected)", file: file, line: line)
    }

    /// The program: top-level code (main-actor isolated) counting ticks in `next:`.
    func testATopLevelProgramMutatingItsStateInNextDoesNotCompile() throws {
        try assertDiagnostics("""
            import ReactiveUV

            var ticks = 0
            let subscription = Signal<Int>.interval(.milliseconds(10)).subscribeNext { _ in ticks += 1 }  // expect: main actor-isolated var 'ticks' can not be mutated from a nonisolated context
            """, fileName: "main.swift")
    }

    /// Main-actor state mutated from every kind of callback that runs on a loop thread.
    func testMutatingMainActorStateFromLoopCallbacksDoesNotCompile() throws {
        try assertDiagnostics("""
            import ReactiveUV

            @MainActor var counter = 0

            @MainActor final class Model {
                var count = 0
                func start(_ signal: Signal<Int>) -> any Disposable {
                    signal.subscribeNext { self.count += $0 }  // expect: main actor-isolated property 'count' can not be mutated
                }
            }

            @MainActor func inNext(_ signal: Signal<Int>) -> any Disposable {
                signal.subscribe(next: { counter += $0 })  // expect: main actor-isolated var 'counter' can not be mutated
            }

            @MainActor func inCompleted(_ signal: Signal<Int>) -> any Disposable {
                signal.subscribe(completed: { counter = 0 })  // expect: main actor-isolated var 'counter' can not be mutated
            }

            @MainActor func inObserve(_ signal: Signal<Int>) -> any Disposable {
                signal.observe { _ in counter = 0 }  // expect: main actor-isolated var 'counter' can not be mutated
            }

            @MainActor func inAnOperator(_ signal: Signal<Int>) -> Signal<Int> {
                signal.map { value in counter += value; return value }  // expect: main actor-isolated var 'counter' can not be mutated
            }

            @MainActor func inDidSubscribe() -> Signal<Int> {
                Signal { subscriber in
                    counter += 1  // expect: main actor-isolated var 'counter' can not be mutated
                    return nil
                }
            }

            @MainActor func inTeardown() -> any Disposable {
                ActionDisposable { counter = 0 }  // expect: main actor-isolated var 'counter' can not be mutated
            }
            """)
    }

    /// A callback is handed over to the loop thread: state the caller keeps using cannot go with it.
    func testHandingOverStateTheCallerKeepsUsingDoesNotCompile() throws {
        try assertDiagnostics("""
            import ReactiveUV

            final class Tally { var total = 0 }

            func sharedWithTheCaller(_ signal: Signal<Int>) -> Int {
                let tally = Tally()
                _ = signal.subscribeNext { tally.total += $0 }  // expect: risks causing data races
                return tally.total
            }
            """)
    }

    /// Values handed to another thread (`deliver(on:)`, `subscribe(on:)`, a task through `values`, `first()`,
    /// `collect()`, a blocked thread through `last(timeout:)`) or kept for every subscription must be Sendable.
    func testNonSendableValuesCannotBeMovedToAnotherThreadOrSharedBySubscriptions() throws {
        try assertDiagnostics("""
            import ReactiveUV

            final class Frame { var pixels: [UInt8] = [] }

            func delivered(_ frames: Signal<Frame>, on loop: EventLoop) -> Signal<Frame> {
                frames.deliver(on: loop.scheduler)  // expect: type 'Frame' does not conform to the 'Sendable' protocol
            }

            func subscribedElsewhere(_ frames: Signal<Frame>, on loop: EventLoop) -> Signal<Frame> {
                frames.subscribe(on: loop.scheduler)  // expect: type 'Frame' does not conform to the 'Sendable' protocol
            }

            func oneStartForEverySubscription(_ ticks: Signal<Int>) -> Signal<Frame> {
                ticks.scan(Frame()) { frame, _ in frame }  // expect: type 'Frame' does not conform to the 'Sendable' protocol
            }

            func awaited(_ frames: Signal<Frame>) async throws -> Frame? {
                try await frames.first()  // expect: type 'Frame' does not conform to the 'Sendable' protocol
            }

            func iterated(_ frames: Signal<Frame>) async throws {
                for try await frame in frames.values { _ = frame }  // expect: type 'Frame' does not conform to the 'Sendable' protocol
            }

            func blockedFor(_ frames: Signal<Frame>) throws -> Frame? {
                try frames.last(timeout: .seconds(1))  // expect: type 'Frame' does not conform to the 'Sendable' protocol
            }

            func framesStayOnTheirLoop(_ frames: Signal<Frame>) -> Signal<Int> {
                frames.map { $0.pixels.count }.filter { $0 > 0 }
            }
            """)
    }

    /// The control: fresh state handed over with the callback, a loop-bound box and a hop to the main actor compile.
    func testFreshStateLoopBoundStateAndAMainActorHopCompile() throws {
        let compiler = try SnippetCompiler()
        let outcome = try compiler.compile("""
            import ReactiveUV

            final class Tally { var total = 0 }

            @MainActor var counter = 0

            @MainActor func freshState(_ signal: Signal<Int>) -> any Disposable {
                let tally = Tally()
                return signal.observe { event in
                    switch event {
                    case .next(let value): tally.total += value
                    case .error, .completed: print(tally.total)
                    }
                }
            }

            func loopBound(_ signal: Signal<Int>, on loop: EventLoop) -> any Disposable {
                let total = LoopBound(0, loop: loop)
                return signal.subscribe(next: { total.value += $0 }, completed: { print(total.value) })
            }

            @MainActor func hopsToTheMainActor(_ signal: Signal<Int>) -> any Disposable {
                signal.subscribeNext { value in Task { @MainActor in counter += value } }
            }
            """)
        XCTAssertEqual(outcome.status, 0, "the control must compile; compiler output:\n\(outcome.output)")
        XCTAssertTrue(outcome.errors.isEmpty, "\(outcome.errors)")
    }
}

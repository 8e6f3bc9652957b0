import Foundation
import ReactiveUV
import XCTest

/// Runs a test on a fresh event loop and checks, at the end, that it left nothing open.
///
/// `record(_:)` records a signal subscribed on the loop's thread; `onLoop(_:)` runs code there
/// and waits; `wait(for:until:)` waits for a condition; `finish()` disposes every recorder, lists
/// the handles still open (none may be), shuts the loop down and checks `uv_loop_close` returned 0.
/// `LoopHarness.run { harness in ... }` does all of it and reports problems with `XCTFail`.
///
/// Thread rule: use from the test's thread (not the loop's).
public final class LoopHarness: @unchecked Sendable {
    // Sendable: `lock` guards the recorders and the report; `loop` and `timeout` are immutable.
    /// The loop the test runs on.
    public let loop: EventLoop
    /// The default deadline for waits.
    public let timeout: Duration

    /// The deadline every wait of the testing library takes unless told otherwise: a 60-second hang
    /// guard a busy machine never reaches when the awaited thing happens.
    ///
    /// Thread rule: safe from any thread.
    public static let defaultTimeout: Duration = .seconds(60)
    private let lock = Locked<(recorders: [any Disposable], report: HarnessReport?)>(([], nil))

    /// Starts a fresh loop named `name` for one test, `timeout` the default deadline for its waits
    /// (`metrics` nil: `LoopMetrics.default`); call `finish()` at the end (or use `run`).
    ///
    /// Thread rule: safe from any thread.
    public init(name: String = "harness", timeout: Duration = LoopHarness.defaultTimeout, metrics: LoopMetrics? = nil) {
        loop = EventLoop(name: name, metrics: metrics)
        self.timeout = timeout
    }

    deinit {
        // A safety net for a test that forgot finish(): never leave a loop thread behind.
        if lock.withLock({ $0.report == nil }) { _ = finish() }
    }

    /// Runs `body` on a fresh loop, then checks for leaks; every problem, and an error `body`
    /// throws, becomes an `XCTFail`.
    ///
    /// `timeout` and `metrics` are as in `init`; `file` and `line` place the failures.
    ///
    /// - Returns: The report (also checked).
    ///
    /// Thread rule: call from the test's thread.
    @discardableResult
    public static func run(
        timeout: Duration = LoopHarness.defaultTimeout,
        metrics: LoopMetrics? = nil,
        file: StaticString = #filePath,
        line: UInt = #line,
        _ body: (LoopHarness) throws -> Void
    ) -> HarnessReport {
        let harness = LoopHarness(timeout: timeout, metrics: metrics)
        do {
            try body(harness)
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
        let report = harness.finish()
        for problem in report.problems {
            XCTFail(problem, file: file, line: line)
        }
        return report
    }

    /// Subscribes to `signal` on the loop's thread (its home) and records it; `finish()` disposes it.
    ///
    /// - Throws: `WaitTimeout` if the loop does not answer in time.
    ///
    /// Thread rule: call from the test's thread.
    public func record<Value>(_ signal: Signal<Value>, label: String? = nil) throws -> EventRecorder<Value> {
        let box = UnsafeTransfer(signal)
        let recorder = try onLoop { UnsafeTransfer(EventRecorder(box.value, label: label)) }.value
        lock.withLock { $0.recorders.append(RecorderDisposer(recorder.dispose)) }
        return recorder
    }

    /// Runs `body` on the loop's thread and waits for its result.
    ///
    /// - Parameters:
    ///   - timeout: The deadline; the harness default when nil.
    ///   - body: The code to run on the loop.
    /// - Throws: What `body` threw, `WaitTimeout` at the deadline, or `EventLoopError` after shutdown.
    ///
    /// Thread rule: call from the test's thread.
    @discardableResult
    public func onLoop<T>(timeout: Duration? = nil, _ body: @escaping () throws -> T) throws -> T {
        let result = Locked<Result<UnsafeTransfer<T>, any Error>?>(nil)
        let notifier = Notifier()
        let work = UnsafeTransfer(body)
        try loop.tryExecute {
            let outcome = Result { UnsafeTransfer(try work.value()) }
            result.withLock { $0 = outcome }
            notifier.notifyAll()
        }
        let limit = timeout ?? self.timeout
        let done = notifier.wait(timeout: limit) { result.withLock { $0 != nil } }
        guard done, let outcome = result.withLock({ $0 }) else {
            throw WaitTimeout(waitingFor: "work queued on loop '\(loop.name)' to run", timeout: limit,
                              observed: "the loop did not run it (blocked or busy)")
        }
        return try outcome.get().value
    }

    /// Waits until `condition` (checked on the calling thread every millisecond) is true, or throws
    /// `WaitTimeout` naming `what` at the deadline (the harness default when nil).
    ///
    /// Thread rule: call from the test's thread.
    public func wait(for what: String, timeout: Duration? = nil, until condition: () -> Bool) throws {
        try waitFor(what, timeout: timeout ?? self.timeout, observed: "the condition was still false", condition)
    }

    /// Disposes every recorder, lists the handles left open, shuts the loop down and reports what
    /// was left open and what `uv_loop_close` returned. Calling it again returns the first report.
    ///
    /// Thread rule: call from the test's thread.
    public func finish() -> HarnessReport {
        let recorders = lock.withLock { state -> [any Disposable]? in
            if state.report != nil { return nil }
            defer { state.recorders = [] }
            return state.recorders
        }
        guard let recorders else { return lock.withLock { $0.report! } }
        for recorder in recorders { recorder.dispose() }
        var problems: [String] = []
        var leaked: [OpenHandle] = []
        do {
            // Two rounds: teardown queued by the disposals may queue one more hop.
            try onLoop {}
            try onLoop {}
            leaked = try loop.openHandles()
        } catch {
            problems.append("the loop did not answer at the end of the test: \(error)")
        }
        var closeResult: Int32 = -1
        do {
            closeResult = try loop.tryShutdown().loopCloseResult
        } catch {
            problems.append("shutdown failed: \(error)")
        }
        let report = HarnessReport(leakedHandles: leaked, loopCloseResult: closeResult, otherProblems: problems)
        lock.withLock { $0.report = report }
        return report
    }
}

/// What a harness found at the end of a test.
///
/// Thread rule: a value type; safe from any thread.
public struct HarnessReport: Sendable {
    /// Handles still open after every recorder was disposed (there must be none).
    public let leakedHandles: [OpenHandle]
    /// What `uv_loop_close` returned (must be 0).
    public let loopCloseResult: Int32
    /// Anything else that went wrong at teardown.
    public let otherProblems: [String]

    /// One sentence per problem; empty when the test left everything clean.
    ///
    /// Thread rule: safe from any thread.
    public var problems: [String] {
        var list = otherProblems
        if !leakedHandles.isEmpty {
            list.append("\(leakedHandles.count) handle(s) still open at the end of the test: "
                        + leakedHandles.map(\.description).joined(separator: "; "))
        }
        if loopCloseResult != 0 {
            list.append("uv_loop_close returned \(loopCloseResult) instead of 0")
        }
        return list
    }

    /// Whether nothing was left open and the loop closed cleanly.
    ///
    /// Thread rule: safe from any thread.
    public var isClean: Bool { problems.isEmpty }
}

/// Disposes a recorder through a closure (recorders are generic).
private final class RecorderDisposer: Disposable, @unchecked Sendable {
    // Sendable: `action` is immutable and thread-safe; `done` is locked.
    private let action: () -> Void
    private let done = Locked(false)
    init(_ action: @escaping () -> Void) { self.action = action }
    func dispose() {
        if done.withLock({ let was = $0; $0 = true; return was }) { return }
        action()
    }
    var isDisposed: Bool { done.withLock { $0 } }
}

/// Moves a value between the test thread and the loop thread, which run one after the other here.
struct UnsafeTransfer<Wrapped>: @unchecked Sendable {
    // Sendable: the harness waits for the loop to finish with the value before using it.
    var value: Wrapped
    init(_ value: Wrapped) { self.value = value }
}

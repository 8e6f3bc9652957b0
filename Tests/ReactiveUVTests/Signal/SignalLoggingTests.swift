import InMemoryLogging
import Logging
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Signal event logging through swift-log, captured by an in-memory handler.
final class SignalLoggingTests: XCTestCase {
    private func logger(_ handler: InMemoryLogHandler, level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: "signals-test", factory: { _ in handler })
        logger.logLevel = level
        return logger
    }

    private func lines(_ handler: InMemoryLogHandler, signal: String) -> [String] {
        handler.entries.filter { $0.metadata["signal"] == "\(signal)" }.map { "\($0.message)" }
    }

    func testLogEventsLogsSubscribeEachEventAndDisposeWithTheName() {
        let handler = InMemoryLogHandler()
        let logger = logger(handler)
        LoopHarness.run { harness in
            let recorder = try harness.record(Signal.return(1).named("answer").logEvents(to: logger))
            _ = try recorder.waitForTermination()
            try harness.wait(for: "the dispose entry") { lines(handler, signal: "answer").count == 4 }
            XCTAssertEqual(lines(handler, signal: "answer"),
                           ["[answer] subscribe", "[answer] next(1)", "[answer] completed", "[answer] dispose"])
            XCTAssertEqual(handler.entries.map(\.level), [.debug, .trace, .debug, .debug])
            XCTAssertEqual(handler.entries.map { $0.metadata["event"] },
                           ["subscribe", "next", "completed", "dispose"])
        }
    }

    func testErrorsAreLoggedAndTheLoggersLevelFiltersValues() {
        let handler = InMemoryLogHandler()
        let logger = logger(handler, level: .debug)
        LoopHarness.run { harness in
            let failing = Signal<Int> { subscriber in
                subscriber.sendNext(7)
                subscriber.sendError(UVError(code: -2, context: "test"))
                return nil
            }
            let recorder = try harness.record(failing.logEvents(to: logger, name: "failing"))
            _ = try recorder.waitForTermination()
            try harness.wait(for: "the dispose entry") { lines(handler, signal: "failing").last == "[failing] dispose" }
            let logged = lines(handler, signal: "failing")
            XCTAssertEqual(logged.count, 3, "\(logged)")
            XCTAssertEqual(logged.first, "[failing] subscribe")
            XCTAssertTrue(logged[1].hasPrefix("[failing] error("), logged[1])
            XCTAssertFalse(logged.contains { $0.contains("next") }, "values are .trace, filtered out at .debug")
        }
    }

    func testTheGlobalLoggerLogsEverySubscriptionUntilItIsCleared() {
        let handler = InMemoryLogHandler()
        XCTAssertNil(SignalLogging.logger)
        SignalLogging.logger = logger(handler)
        defer { SignalLogging.logger = nil }
        LoopHarness.run { harness in
            let recorder = try harness.record(Signal.return(2).named("global"))
            _ = try recorder.waitForTermination()
            try harness.wait(for: "the dispose entry") { lines(handler, signal: "global").count == 4 }
            XCTAssertEqual(lines(handler, signal: "global"),
                           ["[global] subscribe", "[global] next(2)", "[global] completed", "[global] dispose"])
            SignalLogging.logger = nil
            let quiet = try harness.record(Signal.return(3).named("after"))
            _ = try quiet.waitForTermination()
            XCTAssertEqual(lines(handler, signal: "after"), [], "no logging once the logger is cleared")
        }
    }
}

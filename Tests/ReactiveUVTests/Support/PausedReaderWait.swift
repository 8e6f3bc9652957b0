import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// Waits, from a task, until `loop` has no request pending between two of its callbacks: a reader
/// that its consumer paused then has nothing in flight (each completion either starts the next read
/// or finds the pause), which is the state the shutdown tests of paused readers need.
///
/// - Throws: `TimeoutError` at the deadline (the hang guard), `EventLoopError` if the loop is gone.
func waitUntilNoRequestIsPending(on loop: EventLoop, timeout: Duration = LoopHarness.defaultTimeout) async throws {
    let giveUp = ContinuousClock.now + timeout
    while try await !loop.perform(operation: "waitUntilNoRequestIsPending", { $0.requests.isEmpty }) {
        if ContinuousClock.now >= giveUp {
            throw TimeoutError(waitingFor: "no request pending on \(loop.name)", timeout: timeout, observed: "still pending")
        }
        try await Task.sleep(for: .milliseconds(1))
    }
}

/// Reads `signal` (its work on `loop`) through a `.bounded(1)` buffer until its source has paused
/// with nothing in flight, shuts `loop` down, and checks that the reading then ends with
/// `EventLoopError.shutDown` naming it, not silence.
///
/// The `timeout` operator is the hang guard: a source nobody tells of the shutdown fails the test
/// with `TimeoutError` after 10 s instead of leaving its `for try await` waiting for ever.
///
/// - Returns: The first value read.
@discardableResult
func assertAPausedReaderEndsWithShutDown<Value: Sendable>(
    _ signal: Signal<Value>, on loop: EventLoop, file: StaticString = #filePath, line: UInt = #line
) async throws -> Value? {
    var iterator = signal.timeout(LoopHarness.defaultTimeout, on: EventLoop.shared).values(bufferingPolicy: .bounded(1)).makeAsyncIterator()
    let first = try await iterator.next()
    try await waitUntilNoRequestIsPending(on: loop)  // paused: nothing in flight
    XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0, file: file, line: line)
    do {
        while try await iterator.next() != nil {}
        XCTFail("the reading ended without an error after the loop shut down", file: file, line: line)
    } catch {
        XCTAssertEqual(error as? EventLoopError, EventLoopError.shutDown(loop: loop.name), "\(error)", file: file, line: line)
    }
    return first
}

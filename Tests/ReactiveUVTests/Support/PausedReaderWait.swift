import Foundation
@testable import ReactiveUV
import ReactiveUVTesting

/// Waits, from a task, until `loop` has no request pending between two of its callbacks: a reader
/// that its consumer paused then has nothing in flight (each completion either starts the next read
/// or finds the pause), which is the state the shutdown tests of paused readers need.
///
/// - Throws: `TimeoutError` at the deadline (the hang guard), `EventLoopError` if the loop is gone.
func waitUntilNoRequestIsPending(on loop: EventLoop, timeout: Duration = .seconds(10)) async throws {
    let giveUp = ContinuousClock.now + timeout
    while try await !loop.perform(operation: "waitUntilNoRequestIsPending", { $0.requests.isEmpty }) {
        if ContinuousClock.now >= giveUp {
            throw TimeoutError(waitingFor: "no request pending on \(loop.name)", timeout: timeout, observed: "still pending")
        }
        try await Task.sleep(for: .milliseconds(1))
    }
}

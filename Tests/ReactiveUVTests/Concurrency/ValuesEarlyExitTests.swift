import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

private struct LeftTheLoop: Error {}

/// How a `for try await` loop over `signal.values` is left before the signal ends.
private enum EarlyExit: CaseIterable, CustomStringConvertible {
    case breaking, returning, throwing, cancellingTheTask

    var description: String {
        switch self {
        case .breaking: return "break"
        case .returning: return "return"
        case .throwing: return "throw"
        case .cancellingTheTask: return "task cancellation"
        }
    }
}

/// What the iterating task saw, read on the loop thread right after it left the loop.
private struct ExitObservation: Sendable {
    var received: [Int] = []
    var onHomeLoop = false
    var disposalsAtExit = -1
    var handlesAtExit: [OpenHandle] = []
    var thrown: String?
}

/// Leaving `for try await value in signal.values` early disposes the subscription at once
/// (SE-0298: leaving the loop is an implicit cancellation), without waiting for the source.
///
/// Each test iterates from a task whose executor is the harness loop, which is also the
/// subscription's home, so a disposal made when the loop is left runs before the next
/// statement; the task reads what it needs there, on the loop thread.
final class ValuesEarlyExitTests: XCTestCase {
    /// A source that never ends: five values at once, then nothing; its disposable counts disposals.
    private func burstThatNeverEnds(_ disposals: Locked<Int>) -> Signal<Int> {
        Signal<Int> { subscriber in
            for value in 0..<5 { subscriber.sendNext(value) }
            return ActionDisposable { disposals.withLock { $0 += 1 } }
        }
    }

    /// Runs `iterate` in a task on the harness loop and observes the loop right after it was left.
    private func leave(_ signal: Signal<Int>, by exit: EarlyExit, after count: Int, disposals: Locked<Int>?,
                       on harness: LoopHarness) throws -> ExitObservation {
        let observation = Locked<ExitObservation?>(nil)
        let loop = harness.loop
        Task(executorPreference: loop) {
            var seen = ExitObservation()
            do {
                seen.received = try await iterate(signal, leavingBy: exit, after: count)
            } catch {
                seen.thrown = "\(error)"
            }
            seen.onHomeLoop = EventLoop.current === loop
            seen.disposalsAtExit = disposals?.current ?? -1
            do {
                seen.handlesAtExit = try await loop.openHandles()
            } catch {
                seen.thrown = "openHandles(): \(error)"
            }
            observation.withLock { $0 = seen }
        }
        try harness.wait(for: "the task to leave the loop by \(exit)") { observation.current != nil }
        return observation.current!
    }

    func testBreakReturnThrowAndCancellationDisposeTheSourceAtOnce() throws {
        for exit in EarlyExit.allCases {
            let report = LoopHarness.run { harness in
                let disposals = Locked(0)
                let seen = try leave(burstThatNeverEnds(disposals), by: exit, after: 2, disposals: disposals, on: harness)
                XCTAssertTrue(seen.onHomeLoop, "\(exit): the task ran off its executor")
                XCTAssertEqual(seen.disposalsAtExit, 1, "\(exit): the source was not disposed when the loop was left")
                XCTAssertEqual(seen.received, exit == .throwing ? [] : [0, 1],
                               "\(exit): values after leaving the loop (cancellation must not drain the buffer)")
                XCTAssertEqual(seen.thrown, exit == .throwing ? "\(LeftTheLoop())" : nil, "\(exit)")
                XCTAssertEqual(disposals.current, 1, "\(exit): disposed \(disposals.current) times, once expected")
            }
            XCTAssertTrue(report.isClean, "\(exit): \(report.problems)")
        }
    }

    func testLeavingALoopOverAnIntervalClosesItsTimer() throws {
        for exit in EarlyExit.allCases {
            let report = LoopHarness.run { harness in
                let ticks = Signal<Int>.interval(.milliseconds(1), on: harness.loop)
                let seen = try leave(ticks, by: exit, after: 3, disposals: nil, on: harness)
                XCTAssertTrue(seen.onHomeLoop, "\(exit): the task ran off its executor")
                XCTAssertEqual(seen.handlesAtExit, [], "\(exit): the interval's timer still runs after the loop was left")
                XCTAssertNil(exit == .throwing ? nil : seen.thrown, "\(exit)")
                if exit != .throwing { XCTAssertEqual(seen.received, [0, 1, 2], "\(exit)") }
            }
            XCTAssertTrue(report.isClean, "\(exit): \(report.problems)")
        }
    }

    /// A task off every loop: the subscription's home is `EventLoop.shared`, so the disposal made
    /// when the loop is left is queued there; it must come without the source doing anything.
    func testBreakingOffALoopDisposesTheSourceOnItsHome() throws {
        let disposals = Locked(0)
        let left = Locked<[Int]?>(nil)
        let signal = burstThatNeverEnds(disposals)
        Task {
            let received = try await iterate(signal, leavingBy: .breaking, after: 2)
            left.withLock { $0 = received }
        }
        XCTAssertTrue(waitUntil("the task to leave the loop") { left.current != nil })
        XCTAssertEqual(left.current, [0, 1])
        XCTAssertTrue(waitUntil("the source's disposal on EventLoop.shared") { disposals.current == 1 })
    }

    /// A source that cannot pause overruns the bounded buffer while it is being subscribed
    /// (a synchronous burst): the error ends the sequence and the source is disposed then,
    /// while the iterator is still alive, not when it is dropped.
    func testAnOverflowDuringTheSubscribeBurstDisposesTheSource() throws {
        let report = LoopHarness.run { harness in
            let disposals = Locked(0)
            let outcome = Locked<(error: String, disposals: Int)?>(nil)
            let burst = Signal<Int> { subscriber in
                for value in 0..<100 { subscriber.sendNext(value) }
                return ActionDisposable { disposals.withLock { $0 += 1 } }
            }
            Task(executorPreference: harness.loop) {
                var iterator = burst.values(bufferingPolicy: .bounded(10)).makeAsyncIterator()
                do {
                    while try await iterator.next() != nil {}
                    outcome.withLock { $0 = ("no error", disposals.current) }
                } catch {
                    outcome.withLock { $0 = ("\(error)", disposals.current) }
                }
                withExtendedLifetime(iterator) {}
            }
            try harness.wait(for: "the sequence to end") { outcome.current != nil }
            XCTAssertEqual(outcome.current?.error, "\(SignalValuesError.bufferOverflow(capacity: 10))")
            XCTAssertEqual(outcome.current?.disposals, 1, "the overflowing source was not disposed")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// `for try await connection in TCPServer.serve(...).values`, left after one client: the port is closed.
    func testLeavingALoopOverAServerStopsListening() throws {
        let report = LoopHarness.run { harness in
            let port = Locked<Int?>(nil)
            let left = Locked<Bool?>(nil)
            let loop = harness.loop
            Task(executorPreference: loop) {
                do {
                    events: for try await event in TCPServer.serve(port: 0, on: loop).values {
                        switch event {
                        case .listening(let address): port.withLock { $0 = address.port }
                        case .accepted: break events
                        case .refused, .draining: continue
                        }
                    }
                    left.withLock { $0 = true }
                } catch {
                    left.withLock { $0 = false }
                }
            }
            try harness.wait(for: "the server to listen") { port.current != nil }
            let listening = port.current!
            let client = try BlockingClient(port: listening)
            defer { client.close() }
            try harness.wait(for: "the task to leave the loop after the first client") { left.current != nil }
            XCTAssertEqual(left.current, true, "the server signal failed")
            XCTAssertEqual(connectError(port: listening), ECONNREFUSED,
                           "the port still accepts connections after the loop over the server was left")
            XCTAssertEqual(try harness.loop.openHandles(), [])
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// Iterates `signal.values` and leaves the loop by `exit` once `count` values arrived.
private func iterate(_ signal: Signal<Int>, leavingBy exit: EarlyExit, after count: Int) async throws -> [Int] {
    var received: [Int] = []
    values: for try await value in signal.values {
        received.append(value)
        guard received.count >= count else { continue }
        switch exit {
        case .breaking:
            break values
        case .returning:
            return received
        case .throwing:
            throw LeftTheLoop()
        case .cancellingTheTask:
            // The loop goes on; the next `next()` must end it.
            withUnsafeCurrentTask { $0?.cancel() }
        }
    }
    return received
}

/// Connects to 127.0.0.1:`port`; returns errno, or 0 when the connection was made.
private func connectError(port: Int) -> Int32 {
    do {
        try BlockingClient(port: port).close()
        return 0
    } catch {
        return (error as? BlockingClientError)?.errno ?? -1
    }
}

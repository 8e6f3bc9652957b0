import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A one-request file-system signal subscribed on its loop with `subscribe(next:error:completed:)`
/// sends to the subscription's sink without a `Subscriber` in between (`FileSystemOperation.Gate`).
/// These pin what that gate must still do: nothing after a dispose, one terminal event, and nothing
/// kept alive once the subscription ended, however it ended.
final class FileSystemSinkDeliveryTests: FileSystemTestCase {
    /// Something the subscriber's closures hold, to see when they are let go of.
    private final class Probe: @unchecked Sendable {}  // No state: only its lifetime is watched.
    // Written once on the loop, read by the test after the loop answered.
    private final class WeakProbe: @unchecked Sendable { weak var probe: Probe? }
    private final class Calls: @unchecked Sendable { var log: [String] = [] }  // Loop thread only.

    /// Subscribes to `signal` on the loop with closures that hold a probe and log what they are called with.
    private func subscribe(_ harness: LoopHarness, _ signal: Signal<FileInfo>, calls: Calls, weak: WeakProbe,
                           disposeIn next: Bool = false) throws -> SerialDisposable {
        try harness.onLoop { Self.subscribeHere(signal, calls: calls, weak: weak, disposeIn: next) }
    }

    /// `subscribe`, called on the loop thread.
    private static func subscribeHere(_ signal: Signal<FileInfo>, calls: Calls, weak: WeakProbe,
                                      disposeIn next: Bool = false) -> SerialDisposable {
        let probe = Probe()
        weak.probe = probe
        let holder = SerialDisposable()
        holder.inner = signal.subscribe(next: { info in
            withExtendedLifetime(probe) { calls.log.append("next \(info.size)") }
            if next { holder.dispose() }
        }, error: { error in
            withExtendedLifetime(probe) { calls.log.append("error \((error as? UVError)?.name ?? "?")") }
        }, completed: {
            withExtendedLifetime(probe) { calls.log.append("completed") }
        })
        return holder
    }

    func testAStatSendsItsValueThenCompletionAndKeepsNothingAfter() throws {
        let file = try makeFile("three", [1, 2, 3])
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            _ = try subscribe(harness, Files.stat(file), calls: calls, weak: weak)
            try harness.wait(for: "the stat to end") { (try? harness.onLoop { calls.log.count }) == 2 }
            XCTAssertEqual(try harness.onLoop { calls.log }, ["next 3", "completed"])
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
        }
    }

    func testAFailedStatSendsOneErrorAndKeepsNothingAfter() throws {
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            _ = try subscribe(harness, Files.stat(path("missing")), calls: calls, weak: weak)
            try harness.wait(for: "the stat to fail") { (try? harness.onLoop { calls.log.count }) == 1 }
            XCTAssertEqual(try harness.onLoop { calls.log }, ["error ENOENT"])
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
        }
    }

    /// Disposed right after subscribing, on the loop, before the pool answered: no callback ever
    /// runs, the request ends (the harness checks none is left), and the closures are let go of.
    func testAStatDisposedBeforeItsAnswerCallsNothingAndKeepsNothing() throws {
        let file = try makeFile("three")
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            try harness.onLoop { Self.subscribeHere(Files.stat(file), calls: calls, weak: weak).dispose() }
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
            // Another stat on the same loop, answered after the first request's callback ran.
            let later = Calls(), laterWeak = WeakProbe()
            _ = try subscribe(harness, Files.stat(file), calls: later, weak: laterWeak)
            try harness.wait(for: "a later stat to end") { (try? harness.onLoop { later.log.count }) == 2 }
            XCTAssertEqual(try harness.onLoop { calls.log }, [], "a disposed stat called its subscriber")
        }
    }

    /// Disposed from its own `next`: the value arrives, the completion does not.
    func testAStatDisposedFromItsNextGetsNoCompletion() throws {
        let file = try makeFile("three")
        try checked { harness in
            let calls = Calls(), weak = WeakProbe()
            _ = try subscribe(harness, Files.stat(file), calls: calls, weak: weak, disposeIn: true)
            try harness.wait(for: "the closures let go of") { weak.probe == nil }
            XCTAssertEqual(try harness.onLoop { calls.log }, ["next 3"])
        }
    }

    /// Disposed from another thread while the answers come in: once `dispose()` has returned there,
    /// no callback starts (the sink's handshake waits for one in progress), 200 times over.
    func testNoCallbackStartsAfterDisposeReturnedOnAnotherThread() throws {
        let file = try makeFile("three")
        try checked { harness in
            let late = Locked(0), delivered = Locked(0)
            for _ in 0..<200 {
                let returned = Locked(false)
                let note: @Sendable () -> Void = {
                    delivered.withLock { $0 += 1 }
                    if returned.current { late.withLock { $0 += 1 } }
                }
                let subscription = try harness.onLoop {
                    Files.stat(file).subscribe(next: { _ in note() }, error: { _ in note() }, completed: { note() })
                }
                subscription.dispose()
                returned.withLock { $0 = true }
            }
            XCTAssertEqual(late.current, 0, "callbacks started after dispose() returned (of \(delivered.current) delivered)")
        }
    }
}

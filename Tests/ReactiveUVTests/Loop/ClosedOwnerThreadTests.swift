import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A thread whose own loop has closed is a plain thread again: it may shut other loops down and
/// wait for them (the echo sample's main thread shuts its group down after its own loop).
final class ClosedOwnerThreadTests: XCTestCase {
    func testAThreadWhoseLoopClosedWaitsForAnotherLoopsShutdown() {
        let outcome = Locked<String>("not run")
        onNewThread {
            let owner = EventLoop.onCurrentThread(name: "closed-owner")
            let other = EventLoop(name: "other-of-closed-owner")
            // Work queued to the other loop that the shutdown must let finish before it returns.
            let ran = Locked(false)
            other.execute { ran.withLock { $0 = true } }
            owner.run()
            owner.shutdown()
            do {
                _ = try other.tryShutdown()
                outcome.withLock { $0 = other.isShutDown && ran.current ? "closed" : "returned before the loop closed" }
            } catch {
                outcome.withLock { $0 = "threw \(error)" }
            }
        }
        // The echo sample relies on this: it shuts its own loop down first, then waits for its group.
        XCTAssertEqual(outcome.current, "closed")
    }
}

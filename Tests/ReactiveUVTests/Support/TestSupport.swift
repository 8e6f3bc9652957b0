import CTestSupport
import Foundation
import ReactiveUV
import XCTest

/// A value guarded by a lock, shareable between the test thread and loop threads.
final class Locked<Value>: @unchecked Sendable {
    // `value` is protected by `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    var current: Value { withLock { $0 } }
}

/// Waits until `condition` holds, checking every millisecond; fails the test at the deadline.
///
/// - Returns: Whether the condition became true.
@discardableResult
func waitUntil(
    _ what: String,
    timeout: Duration = .seconds(10),
    file: StaticString = #filePath,
    line: UInt = #line,
    _ condition: () -> Bool
) -> Bool {
    let deadline = SchedulerInstant.now + timeout
    while !condition() {
        if SchedulerInstant.now >= deadline {
            XCTFail("timed out after \(timeout) waiting for \(what)", file: file, line: line)
            return false
        }
        usleep(1000)
    }
    return true
}

/// Runs `body` on the loop thread and waits for its result.
func onLoop<T: Sendable>(_ loop: EventLoop, file: StaticString = #filePath, line: UInt = #line, _ body: @escaping @Sendable () -> T) -> T? {
    let result = Locked<T?>(nil)
    loop.execute { let value = body(); result.withLock { $0 = value } }
    guard waitUntil("work on loop '\(loop.name)'", file: file, line: line, { result.current != nil }) else { return nil }
    return result.current
}

/// Starts `count` threads running `body(index)` and waits for all of them.
func runConcurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    group.wait()
}

/// Runs `body` on a new thread (one that owns no loop) and waits for it.
func onNewThread(_ body: @escaping @Sendable () -> Void) {
    runConcurrently(1) { _ in body() }
}

/// Milliseconds in a duration, as a Double.
func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

/// Bytes the process has allocated and not yet freed, in MiB.
///
/// Memory-bound tests measure this rather than resident memory: under the
/// address sanitizer freed blocks sit in a quarantine of up to 256 MiB and
/// shadow memory grows with every address ever touched, so resident memory
/// says little about what our code holds. See `ruv_test_live_heap_bytes`.
func liveHeapMegabytes() -> Double {
    Double(ruv_test_live_heap_bytes()) / 1_048_576
}

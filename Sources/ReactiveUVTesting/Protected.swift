import Foundation

/// A value behind an `NSLock` (a pthread mutex the thread sanitizer understands;
/// `Synchronization.Mutex` is invisible to it on Linux).
final class Protected<Value>: @unchecked Sendable {
    // `value` is protected by `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

import Foundation

/// A value behind an `NSLock` (which the thread sanitizer sees, unlike `Mutex` on Linux),
/// shareable between a test's thread, loop threads and client threads.
///
/// Thread rule: safe from any thread.
public final class Locked<Value>: @unchecked Sendable {
    // Sendable: `lock` guards `value`.
    private let lock = NSLock()
    private var value: Value

    /// A box holding `value`.
    ///
    /// Thread rule: safe from any thread.
    public init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock; keep it to reading or changing the value.
    ///
    /// Thread rule: safe from any thread; `body` must not take this lock again.
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// A copy of the value, read under the lock; setting it replaces the value under the lock (use
    /// `withLock` for a read-modify-write).
    ///
    /// Thread rule: safe from any thread.
    public var current: Value {
        get { withLock { $0 } }
        set { withLock { $0 = newValue } }
    }
}

extension Locked where Value: RangeReplaceableCollection {
    /// Appends `element` under the lock: a test's callbacks collect what they saw this way.
    ///
    /// Thread rule: safe from any thread.
    public func append(_ element: Value.Element) {
        withLock { $0.append(element) }
    }
}

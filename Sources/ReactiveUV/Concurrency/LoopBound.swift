/// A value confined to one event loop's thread, safe to carry across threads.
///
/// Wrap non-Sendable loop-owned state touched from async code on the loop, pass the box around
/// freely, and use it only on the loop thread: every access checks and traps otherwise.
///
/// Thread rule: create and pass anywhere; `value` only on the loop thread.
public struct LoopBound<Value>: @unchecked Sendable {
    // Sendable: `value` is reached only through accessors that check the loop thread.
    private let storage: Storage
    /// The loop the value is confined to.
    public let loop: EventLoop

    private final class Storage {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    /// Wraps a value that will be used on `loop`'s thread only.
    ///
    /// Thread rule: safe from any thread (the value is handed over, not shared).
    public init(_ value: consuming Value, loop: EventLoop) {
        self.storage = Storage(value)
        self.loop = loop
    }

    /// The value.
    ///
    /// Thread rule: loop thread only (traps elsewhere).
    public var value: Value {
        get {
            loop.checkIsolated()
            return storage.value
        }
        nonmutating set {
            loop.checkIsolated()
            storage.value = newValue
        }
    }
}

extension EventLoop {
    /// Runs `body` knowing the caller is on this loop's thread (traps otherwise), to touch
    /// loop-confined state from synchronous code.
    ///
    /// Thread rule: loop thread only (traps elsewhere with a clear message).
    public func assumeInEventLoop<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        checkIsolated()
        return try body()
    }
}

/// A value confined to one event loop's thread, safe to carry across threads.
///
/// The pattern for loop-owned state touched from async code that runs on the
/// loop (a task with `executorPreference: loop`, an actor on the loop's
/// executor): wrap the non-Sendable state, pass the box around freely, and
/// read or write it only on the loop thread. Every access checks the thread
/// and traps with a clear message if the rule is broken.
///
/// Thread rule: create and pass anywhere; `value` only on the loop thread.
public struct LoopBound<Value>: @unchecked Sendable {
    // Safe because `value` is only reached through accessors that check `loop.inEventLoop`.
    private let storage: Storage
    /// The loop the value is confined to.
    public let loop: EventLoop

    private final class Storage {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    /// Wraps a value that will be used on `loop`'s thread only.
    ///
    /// - Parameters:
    ///   - value: The value.
    ///   - loop: The loop whose thread may use it.
    /// - Returns: The box.
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
    /// Runs `body` knowing the caller is on this loop's thread (traps otherwise).
    ///
    /// For synchronous code reached from a loop callback, a task on the loop, or
    /// an actor on the loop's executor, that needs to touch loop-confined state.
    ///
    /// - Parameter body: The code to run.
    /// - Returns: What `body` returns.
    ///
    /// Thread rule: loop thread only (traps elsewhere with a clear message).
    public func assumeInEventLoop<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        checkIsolated()
        return try body()
    }
}

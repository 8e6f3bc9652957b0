/// Code a loop runs on its own thread when it begins shutting down, before it closes its handles:
/// time operators scheduled on the loop end with `EventLoopError.shutDown` instead of waiting for ever.
/// Thread rule: `add` and the disposables it returns from any thread; `fireAll` on the loop thread.
final class ShutdownObservers: @unchecked Sendable {
    // Sendable: `state` is behind its lock; observers are called after it is released.
    private struct State {
        var observers: [UInt64: @Sendable () -> Void] = [:]
        var nextKey: UInt64 = 0
        var fired = false
    }
    private let state = LockedValue(State())

    /// Registers `observer`; returns what unregisters it, or nil when the loop already began shutting down.
    func add(_ observer: @escaping @Sendable () -> Void) -> (any Disposable)? {
        let key: UInt64? = state.withLock { state in
            if state.fired { return nil }
            let key = state.nextKey
            state.nextKey += 1
            state.observers[key] = observer
            return key
        }
        guard let key else { return nil }
        // Strong, not weak: this object refers to no loop, and a weak reference's side table
        // outlives its closure in a way LeakSanitizer reports as lost.
        return ActionDisposable { [self] in
            _ = state.withLock { $0.observers.removeValue(forKey: key) }
        }
    }

    /// Runs every observer once and refuses new ones (shutdown, loop thread).
    func fireAll() {
        let observers = state.withLock { state in
            state.fired = true
            defer { state.observers = [:] }
            return Array(state.observers.values)
        }
        for observer in observers { observer() }
    }
}

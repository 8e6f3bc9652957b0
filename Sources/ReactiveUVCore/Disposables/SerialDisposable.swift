
/// Holds one replaceable inner disposable: setting `inner` disposes the one it replaces; `swap(_:)`
/// does not (RAC's `swapInDisposable:`). Once disposed, anything swapped in is disposed at once.
///
/// Thread rule: safe from any thread; inner disposables are disposed outside the lock.
public final class SerialDisposable: Disposable, @unchecked Sendable {
    // Sendable: `lock` guards `state`.
    private struct State {
        var inner: (any Disposable)?
        var disposed = false
    }
    private let lock = SpinLock()
    @exclusivity(unchecked) private var state = State()

    private func withState<R>(_ body: (inout State) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }

    /// Creates a serial disposable, optionally holding `inner`.
    ///
    /// Thread rule: safe from any thread.
    public init(_ inner: (any Disposable)? = nil) {
        withState { $0.inner = inner }
    }

    /// The current inner disposable. Setting it disposes the one it replaces.
    ///
    /// Thread rule: safe from any thread.
    public var inner: (any Disposable)? {
        get { withState { $0.inner } }
        set {
            let old = swap(newValue)
            old?.dispose()
        }
    }

    /// Replaces the inner disposable without disposing the old one, which it returns.
    ///
    /// - Parameter newInner: The new inner disposable; disposed at once if this is already disposed.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func swap(_ newInner: (any Disposable)?) -> (any Disposable)? {
        let (old, refused) = withState { s -> ((any Disposable)?, Bool) in
            if s.disposed { return (nil, true) }
            let old = s.inner
            s.inner = newInner
            return (old, false)
        }
        if refused { newInner?.dispose() }
        return old
    }

    /// Disposes the inner disposable; later swaps are disposed at once.
    ///
    /// Thread rule: safe from any thread.
    public func dispose() {
        takeForDisposal()?.dispose()
    }

    /// Disposes like `dispose()`, then waits for the inner disposable (`Disposable.disposeAndWait()`).
    ///
    /// Thread rule: safe from any task; blocks no thread.
    public func disposeAndWait() async {
        await takeForDisposal()?.disposeAndWait()
    }

    /// Marks this disposed and takes the inner disposable out (nil when already disposed).
    private func takeForDisposal() -> (any Disposable)? {
        withState { s -> (any Disposable)? in
            if s.disposed { return nil }
            s.disposed = true
            let old = s.inner
            s.inner = nil
            return old
        }
    }

    /// Whether `dispose()` has been called.
    ///
    /// Thread rule: safe from any thread.
    public var isDisposed: Bool { withState { $0.disposed } }
}

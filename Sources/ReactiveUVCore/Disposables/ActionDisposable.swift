import Synchronization

/// Runs an action exactly once, on the first `dispose()` (an atomic exchange picks one of racing
/// callers), then releases it and what it captured.
///
/// Thread rule: safe from any thread; the action runs on the thread that
/// disposes first (a subscription always disposes on its home loop).
public final class ActionDisposable: Disposable, @unchecked Sendable {
    // Sendable: `action` is written in init, then only by the one thread that wins `disposed.exchange`.
    private let disposed = Atomic<Bool>(false)
    private var action: (() -> Void)?

    /// Creates a disposable that runs `action` on its first `dispose()`.
    ///
    /// Thread rule: safe from any thread.
    public init(_ action: sending @escaping () -> Void) {
        self.action = action
    }

    /// Creates a disposable with no action, useful only as a flag.
    ///
    /// Thread rule: safe from any thread.
    public init() {
        self.action = nil
    }

    /// Runs the action if this is the first call.
    ///
    /// Thread rule: safe from any thread.
    public func dispose() {
        guard !disposed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let action = self.action
        self.action = nil
        action?()
    }

    /// Whether `dispose()` has been called.
    ///
    /// Thread rule: safe from any thread.
    public var isDisposed: Bool { disposed.load(ordering: .acquiring) }
}

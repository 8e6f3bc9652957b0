import Synchronization

/// Runs an action exactly once, on the first `dispose()`.
///
/// The action is released right after it ran, freeing what it captured. Two threads disposing
/// at once still run it once: an atomic exchange picks the winner.
///
/// Thread rule: safe from any thread; the action runs on the thread that
/// disposes first (a subscription always disposes on its home loop).
public final class ActionDisposable: Disposable, @unchecked Sendable {
    // `action` is written in init and afterwards only by the single thread that wins `disposed.exchange`.
    private let disposed = Atomic<Bool>(false)
    private var action: (() -> Void)?

    /// Creates a disposable that runs `action` on its first `dispose()`.
    ///
    /// - Parameter action: The teardown to run once.
    /// - Returns: A disposable not yet disposed.
    ///
    /// Thread rule: safe from any thread.
    public init(_ action: sending @escaping () -> Void) {
        self.action = action
    }

    /// Creates a disposable with no action, useful only as a flag.
    ///
    /// - Returns: A disposable not yet disposed.
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

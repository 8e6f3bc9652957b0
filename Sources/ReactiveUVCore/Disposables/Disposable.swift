/// Something that can be torn down: a subscription, a scheduled piece of work, an open handle.
///
/// `dispose()` is idempotent and never blocks, on any thread. For a subscription: once it has
/// returned, no callback *begins*; one already running on another thread may finish there, and
/// `disposeAndWait()` suspends (blocking no thread) until it has.
///
/// Thread rule: every conformance in ReactiveUV is safe from any thread.
public protocol Disposable: AnyObject, Sendable {
    /// Tears the resource down; later calls do nothing. Never blocks.
    ///
    /// For a subscription: once this returns, no callback of it begins (one running elsewhere may be
    /// finishing); the teardown runs on its home loop thread.
    ///
    /// Thread rule: safe from any thread.
    func dispose()

    /// Disposes, then suspends until a callback of the subscription already running on another
    /// thread has returned (at once when none runs, or from inside one of its callbacks).
    ///
    /// It blocks no thread; cancelling the task does not cut the wait short. Compound, serial and
    /// scoped disposables wait for what they hold.
    ///
    /// Thread rule: safe from any task, including one on a loop's executor.
    func disposeAndWait() async

    /// Whether `dispose()` has been called.
    ///
    /// Thread rule: safe from any thread.
    var isDisposed: Bool { get }
}

extension Disposable {
    /// Disposes and returns: a disposable that runs no callbacks of its own has none to wait for.
    ///
    /// Thread rule: safe from any task.
    public func disposeAndWait() async {
        dispose()
    }

    /// Wraps this disposable in a `ScopedDisposable`, disposed when the wrapper is released.
    ///
    /// Thread rule: safe from any thread.
    public func scoped() -> ScopedDisposable { ScopedDisposable(self) }

    /// Adds this disposable to `compound`, so disposing the compound disposes it.
    ///
    /// Thread rule: safe from any thread.
    public func dispose(with compound: CompoundDisposable) { compound.add(self) }
}

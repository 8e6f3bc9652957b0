/// Something that can be torn down: a subscription, a scheduled piece of work, an open handle.
///
/// `dispose()` is idempotent: the first call does the work, later calls do
/// nothing. `isDisposed` becomes true once `dispose()` has been called.
///
/// `dispose()` never blocks, on any thread. For a subscription: once it has
/// returned, no callback of that subscription *begins*; one already running
/// on another thread may finish there. `disposeAndWait()` also waits for that
/// callback to return, suspending the task instead of blocking a thread.
///
/// Thread rule: every conformance in ReactiveUV is safe from any thread.
public protocol Disposable: AnyObject, Sendable {
    /// Tears the resource down; later calls do nothing. Never blocks.
    ///
    /// For a subscription: once this returns, no callback of it begins; one already
    /// running on another thread may still be finishing (await `disposeAndWait()` to know
    /// it has). The teardown runs on the subscription's home loop thread.
    ///
    /// Thread rule: safe from any thread.
    func dispose()

    /// Disposes, then suspends until a callback of the subscription already running on
    /// another thread has returned. Returns at once when none runs, and when awaited from
    /// inside one of the subscription's own callbacks (it would wait for itself).
    ///
    /// It blocks no thread: the task waits for the home loop to finish the callback it is
    /// running (a job queued behind it), or, for a callback on another thread (`deliver(on:)`),
    /// looks again after short sleeps. Cancelling the task does not cut the wait short. The
    /// default implementation, for disposables that run no callbacks of their own, disposes
    /// and returns; compounds, serial and scoped disposables wait for what they hold.
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

    /// Wraps this disposable so it is disposed when the wrapper is released.
    ///
    /// - Returns: A `ScopedDisposable` owning `self`.
    ///
    /// Thread rule: safe from any thread.
    public func scoped() -> ScopedDisposable { ScopedDisposable(self) }

    /// Adds this disposable to a compound one, so disposing the compound disposes it.
    ///
    /// - Parameter compound: The owner.
    ///
    /// Thread rule: safe from any thread.
    public func dispose(with compound: CompoundDisposable) { compound.add(self) }
}

/// Something that can be torn down: a subscription, a scheduled piece of work, an open handle.
///
/// `dispose()` is idempotent: the first call does the work, later calls do
/// nothing. `isDisposed` becomes true once `dispose()` has been called.
///
/// Thread rule: every conformance in ReactiveUV is safe from any thread.
public protocol Disposable: AnyObject, Sendable {
    /// Tears the resource down; later calls do nothing.
    ///
    /// Thread rule: safe from any thread.
    func dispose()

    /// Whether `dispose()` has been called.
    ///
    /// Thread rule: safe from any thread.
    var isDisposed: Bool { get }
}

extension Disposable {
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

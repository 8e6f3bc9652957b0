/// Disposes its inner disposable when it is released (or disposed): store one to tie a
/// subscription to an object's lifetime.
///
/// Thread rule: safe from any thread.
public final class ScopedDisposable: Disposable {
    /// The owned disposable.
    public let inner: any Disposable

    /// Wraps `inner`, disposing it when this object is released.
    ///
    /// Thread rule: safe from any thread.
    public init(_ inner: any Disposable) {
        self.inner = inner
    }

    deinit { inner.dispose() }

    /// Disposes the inner disposable now.
    ///
    /// Thread rule: safe from any thread.
    public func dispose() { inner.dispose() }

    /// Disposes the inner disposable now and waits for it (`Disposable.disposeAndWait()`).
    ///
    /// Thread rule: safe from any task; blocks no thread.
    public func disposeAndWait() async { await inner.disposeAndWait() }

    /// Whether the inner disposable is disposed.
    ///
    /// Thread rule: safe from any thread.
    public var isDisposed: Bool { inner.isDisposed }
}

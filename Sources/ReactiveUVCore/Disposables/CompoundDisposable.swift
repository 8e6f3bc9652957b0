import Synchronization

/// A disposable that owns other disposables and disposes them all at once.
///
/// - Adding to a compound that is already disposed disposes the newcomer at once.
/// - Children that finished on their own can be removed (`remove(_:)`), so a
///   long-lived compound does not grow.
/// - `dispose()` takes the children out under the lock and disposes them
///   after releasing it, so a child's teardown may touch this compound again.
///
/// Thread rule: safe from any thread.
public class CompoundDisposable: Disposable, @unchecked Sendable {
    // `first` and `rest` are protected by `childrenLock`; `disposedFlag` is atomic.
    @usableFromInline package let disposedFlag = Atomic<Bool>(false)
    private let childrenLock = SpinLock()
    // Most compounds (one per subscription) hold one child: it lives inline, no array.
    @exclusivity(unchecked) private var first: (any Disposable)?
    @exclusivity(unchecked) private var rest: [any Disposable] = []

    /// Creates an empty compound disposable.
    ///
    /// - Returns: A compound not yet disposed.
    ///
    /// Thread rule: safe from any thread.
    public init() {}

    /// Creates a compound disposable owning `disposables`.
    ///
    /// - Parameter disposables: The initial children.
    /// - Returns: A compound not yet disposed.
    ///
    /// Thread rule: safe from any thread.
    public init(_ disposables: [any Disposable]) {
        first = disposables.first
        rest = Array(disposables.dropFirst())
    }

    /// Adds a child; if this compound is already disposed, disposes the child at once.
    ///
    /// - Parameter disposable: The child, or nil (ignored, as RAC ignores a nil disposable).
    ///
    /// Thread rule: safe from any thread.
    public func add(_ disposable: (any Disposable)?) {
        guard let disposable else { return }
        let added: Bool = childrenLock.withLock {
            // Checked under the lock: `dispose()` sets the flag before taking the children,
            // so a child is either taken by it or refused here, never lost.
            if disposedFlag.load(ordering: .acquiring) { return false }
            if first == nil {
                first = disposable
            } else {
                rest.append(disposable)
            }
            return true
        }
        if !added { disposable.dispose() }
    }

    /// Removes a child without disposing it (for children that finished on their own).
    ///
    /// - Parameter disposable: The child to forget; matched by identity.
    ///
    /// Thread rule: safe from any thread.
    public func remove(_ disposable: any Disposable) {
        childrenLock.withLock {
            if let index = rest.lastIndex(where: { $0 === disposable }) {
                rest.remove(at: index)
            } else if first === disposable {
                first = rest.isEmpty ? nil : rest.removeFirst()
            }
        }
    }

    /// The number of children currently held.
    ///
    /// Thread rule: safe from any thread.
    public var count: Int { childrenLock.withLock { (first == nil ? 0 : 1) + rest.count } }

    /// Disposes every child; later calls do nothing.
    ///
    /// Thread rule: safe from any thread; the children are disposed on the calling thread.
    public func dispose() {
        guard markDisposed() else { return }
        disposeChildren()
    }

    /// Disposes every child, then waits for each (`Disposable.disposeAndWait()`). All are
    /// disposed before the first wait, so none goes on starting callbacks meanwhile. A compound
    /// already disposed has let go of its children and returns at once.
    ///
    /// Thread rule: safe from any task; blocks no thread.
    public func disposeAndWait() async {
        guard markDisposed() else { return }
        let children: [any Disposable] = childrenLock.withLock {
            guard let taken = first.take() else { return [] }
            var all = [taken]
            all.append(contentsOf: rest)
            rest = []
            return all
        }
        for child in children { child.dispose() }
        for child in children { await child.disposeAndWait() }
    }

    /// Whether `dispose()` has been called.
    ///
    /// Thread rule: safe from any thread.
    public var isDisposed: Bool { disposedFlag.load(ordering: .acquiring) }

    /// Sets the flag; true for the one caller that set it first.
    final func markDisposed() -> Bool {
        !disposedFlag.exchange(true, ordering: .sequentiallyConsistent)
    }

    /// Takes the children out under the lock and disposes them outside it.
    final func disposeChildren() {
        let (taken, more) = childrenLock.withLock { () -> ((any Disposable)?, [any Disposable]?) in
            // `first` is nil only when there are no children (`add` and `remove` keep it so).
            // Moved out, not copied, and an empty `rest` (the common case) is left untouched.
            guard let taken = first.take() else { return (nil, nil) }
            if rest.isEmpty { return (taken, nil) }
            var more: [any Disposable] = []
            swap(&more, &rest)
            return (taken, more)
        }
        // Consumed: a borrowed binding would retain and release the child around the call.
        switch consume taken {
        case .some(let child): child.dispose()
        case .none: return
        }
        if let more { for child in more { child.dispose() } }
    }
}

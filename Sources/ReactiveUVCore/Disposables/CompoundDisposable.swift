import Synchronization

/// A disposable that owns other disposables and disposes them all at once.
///
/// Adding to a disposed compound disposes the newcomer at once; children that finished on their
/// own can be removed, so a long-lived compound does not grow. Children are disposed outside the
/// lock, so a child's teardown may touch this compound again.
///
/// Thread rule: safe from any thread.
public class CompoundDisposable: Disposable, @unchecked Sendable {
    // Sendable: `childrenLock` guards `first` and `rest`; `disposedFlag` is atomic.
    @usableFromInline package let disposedFlag = Atomic<Bool>(false)
    private let childrenLock = SpinLock()
    // Most compounds (one per subscription) hold one child: inline, no array.
    @exclusivity(unchecked) private var first: (any Disposable)?
    @exclusivity(unchecked) private var rest: [any Disposable] = []

    /// Creates an empty compound disposable.
    ///
    /// Thread rule: safe from any thread.
    public init() {}

    /// Creates a compound disposable owning `disposables`.
    ///
    /// Thread rule: safe from any thread.
    public init(_ disposables: [any Disposable]) {
        first = disposables.first
        rest = Array(disposables.dropFirst())
    }

    /// Adds a child (nil is ignored, as in RAC); if this compound is already disposed, disposes it at once.
    ///
    /// Thread rule: safe from any thread.
    public func add(_ disposable: (any Disposable)?) {
        guard let disposable else { return }
        let added: Bool = childrenLock.withLock {
            // Under the lock: `dispose()` sets the flag before taking the children, so a child is taken
            // by it or refused here, never lost.
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

    /// Removes a child, matched by identity, without disposing it (for children that finished on their own).
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

    /// Disposes every child, then waits for each (`Disposable.disposeAndWait()`); all are disposed
    /// before the first wait. An already disposed compound returns at once.
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
            // `first` is nil only when there are no children. Moved out, not copied; an empty `rest` is left untouched.
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

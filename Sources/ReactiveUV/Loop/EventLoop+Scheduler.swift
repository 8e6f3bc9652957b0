import Synchronization

// Work scheduled to run soon (`schedule(_:)`), cancellable until it starts.
extension EventLoop {
    func scheduleSoon(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        let item = CancellableWork(work)
        guard enqueue({ item.run() }) else {
            execute(work)  // reports the rejection
            return nil
        }
        return item
    }
}

/// Work queued through `execute` that can be cancelled before it runs.
final class CancellableWork: Disposable, @unchecked Sendable {
    // `cancelled` is atomic; `work` is set in init and cleared only by `run()` on the loop thread.
    private let cancelled = Atomic<Bool>(false)
    private var work: (@Sendable () -> Void)?

    init(_ work: @escaping @Sendable () -> Void) { self.work = work }

    func run() {
        let work = self.work
        self.work = nil
        if !cancelled.load(ordering: .acquiring) { work?() }
    }

    func dispose() { cancelled.store(true, ordering: .releasing) }

    var isDisposed: Bool { cancelled.load(ordering: .acquiring) }
}

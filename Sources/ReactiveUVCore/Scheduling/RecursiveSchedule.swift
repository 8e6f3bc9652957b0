import Synchronization

/// The state of one `scheduleRecursive` on an asynchronous scheduler: each reschedule submits one
/// more run through the scheduler, so no run nests inside another.
final class RecursiveSchedule: Disposable, @unchecked Sendable {
    // Sendable: `scheduler` and `action` are immutable; `disposed` is atomic; `lock` guards `pending`.
    private let scheduler: Scheduler
    private let action: @Sendable (_ reschedule: @escaping @Sendable () -> Void) -> Void
    private let disposed = Atomic<Bool>(false)
    private let lock = SpinLock()
    @exclusivity(unchecked) private var pending: (any Disposable)?

    init(scheduler: Scheduler, action: @escaping @Sendable (_ reschedule: @escaping @Sendable () -> Void) -> Void) {
        self.scheduler = scheduler
        self.action = action
    }

    func submit() {
        if isDisposed { return }
        let handle = scheduler.schedule { [self] in run() }
        // The latest run, for dispose() to cancel; older ones have run.
        lock.withLock { pending = handle }
        if isDisposed { handle?.dispose() }
    }

    private func run() {
        if isDisposed { return }
        action { [self] in submit() }
    }

    func dispose() {
        guard !disposed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let handle = lock.withLock { () -> (any Disposable)? in
            let taken = pending
            pending = nil
            return taken
        }
        handle?.dispose()
    }

    package var isDisposed: Bool { disposed.load(ordering: .acquiring) }
}

import Synchronization

/// One piece of scheduled work on a loop's timer queue; the `Disposable` its scheduler returns.
/// Disposing sets a flag at once (work not started never starts) and drops the closure on the loop thread.
final class ScheduledTimer: LoopDisposable, @unchecked Sendable {
    // Sendable: `disposedFlag` is atomic; the rest is loop-thread-only once scheduled (written
    // before the hand-off through the loop's queue).
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    var work: (@Sendable () -> Void)?
    /// Nanoseconds on the monotonic clock.
    var deadline: UInt64
    /// Nanoseconds between runs; 0 for a one-shot timer.
    let interval: UInt64
    /// Whether the loop's heap holds an entry for it (loop thread only).
    var inHeap = false
    /// Run instead of `work` if the loop shuts down while the timer is pending; cleared when it ends.
    var onShutdown: (@Sendable () -> Void)?
    private let requestedDelay: Duration

    init(loop: EventLoop, deadline: UInt64, interval: UInt64, requestedDelay: Duration,
         onShutdown: (@Sendable () -> Void)? = nil, work: @escaping @Sendable () -> Void) {
        self.loop = loop
        self.deadline = deadline
        self.interval = interval
        self.requestedDelay = requestedDelay
        self.onShutdown = onShutdown
        self.work = work
    }

    /// Shutdown: drops the closure without running it, and runs `onShutdown` if the timer was still pending.
    func dropForShutdown() {
        let pending = work != nil && !isCancelled
        let notify = onShutdown
        work = nil
        onShutdown = nil
        if pending { notify?() }
    }

    /// What scheduled it, for leak reports.
    var label: String {
        interval == 0
            ? "timer from schedule(after: \(requestedDelay))"
            : "timer from schedule(after: \(requestedDelay), repeatingEvery: \(Duration.nanoseconds(Int64(clamping: interval))))"
    }

    /// `isDisposed` for the loop thread, which only needs to see its own writes and the hop's.
    var isCancelled: Bool { disposedFlag.load(ordering: .relaxed) }

    /// Disposed: the queue drops the closure now and the heap entry when convenient.
    func abandon() {
        loop.timerWasCancelled(self)
    }
}

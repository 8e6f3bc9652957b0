internal import CLibUV
import Synchronization

/// A libuv timer running one scheduled piece of work, once or repeatedly.
///
/// Created on any thread by `EventLoop.schedule(after:...)`; opened and
/// started on the loop thread. It is itself the `Disposable` the caller gets:
/// disposing sets a flag at once (work that has not started never starts) and
/// closes the handle on the loop thread.
///
/// Deadlines are kept in nanoseconds of the monotonic clock. Each start
/// converts the deadline to a libuv timeout against the loop's cached time,
/// rounding up, so the work never runs before its deadline; a repeating
/// timer advances its deadline by whole intervals from the first one, so
/// it does not drift.
final class TimerHandle: LoopHandle, Disposable, @unchecked Sendable {
    // `cancelled` is atomic; everything else is loop thread only after `start()` is queued.
    private let cancelled = Atomic<Bool>(false)
    private var work: (@Sendable () -> Void)?
    private var deadline: UInt64
    private let interval: UInt64
    private let requestedDelay: Duration

    static let byteCount = uv_handle_size(UV_TIMER)

    init(loop: EventLoop, deadline: UInt64, interval: UInt64, requestedDelay: Duration, work: @escaping @Sendable () -> Void) {
        self.work = work
        self.deadline = deadline
        self.interval = interval
        self.requestedDelay = requestedDelay
        super.init(loop: loop, byteCount: TimerHandle.byteCount)
    }

    override var label: String {
        interval == 0
            ? "timer from schedule(after: \(requestedDelay))"
            : "timer from schedule(after: \(requestedDelay), repeatingEvery: \(Duration.nanoseconds(Int64(clamping: interval))))"
    }

    /// Opens and starts the timer. Loop thread only.
    func start() {
        if cancelled.load(ordering: .acquiring) || !loop.acceptsNewHandles {
            work = nil
            return
        }
        let timer = pointer(as: uv_timer_t.self)
        // Only fails for an invalid loop; reported rather than lost silently.
        guard uvCheckReporting(uv_timer_init(loop.uvLoop, timer), "uv_timer_init (scheduled work dropped)") else {
            work = nil
            return
        }
        didOpen()
        arm()
    }

    private func arm() {
        uvCheckReporting(uv_timer_start(pointer(as: uv_timer_t.self), timerHandleCallback, timeoutMilliseconds(), 0),
                         "uv_timer_start")
    }

    /// Milliseconds from the loop's cached time to the deadline, rounded up.
    private func timeoutMilliseconds() -> UInt64 {
        let loopNow = uv_now(loop.uvLoop) &* 1_000_000
        if deadline <= loopNow { return 0 }
        let remaining = deadline - loopNow
        return remaining / 1_000_000 + (remaining % 1_000_000 == 0 ? 0 : 1)
    }

    fileprivate func fire() {
        guard let work else { return }
        if interval == 0 {
            close()
            work()
            return
        }
        // Next deadline: the first start + k·interval that is still ahead, so a
        // blocked loop coalesces missed ticks instead of bursting, and the
        // restart is never 0 ms from inside the timer callback (a libuv busy loop).
        let now = SchedulerInstant.now.nanoseconds
        deadline &+= interval
        if deadline <= now {
            let behind = (now - deadline) / interval + 1
            deadline &+= behind &* interval
        }
        work()
        if isOpen { arm() }
    }

    override func willClose() {
        uvCheckReporting(uv_timer_stop(pointer(as: uv_timer_t.self)), "uv_timer_stop")
    }

    override func didClose() {
        work = nil
    }

    func dispose() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if loop.inEventLoop {
            close()
            work = nil
        } else {
            // If the loop has shut down, shutdown already closed the handle.
            _ = loop.enqueue { [self] in
                close()
                work = nil
            }
        }
    }

    var isDisposed: Bool { cancelled.load(ordering: .acquiring) }
}

private let timerHandleCallback: uv_timer_cb = { timer in
    guard let data = timer?.pointee.data else { return }
    Unmanaged<TimerHandle>.fromOpaque(data).takeUnretainedValue().fire()
}

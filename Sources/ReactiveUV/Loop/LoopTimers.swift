internal import CLibUV
import Synchronization

/// One piece of scheduled work on a loop's timer queue; the `Disposable` its scheduler returns.
///
/// Created on any thread by `EventLoop.schedule(after:...)`, then owned by the
/// loop's queue until it fires or is cancelled. Disposing sets a flag at once
/// (work that has not started never starts) and, on the loop thread, drops the
/// closure so what it captured is freed.
final class ScheduledTimer: LoopDisposable, @unchecked Sendable {
    // `disposedFlag` is atomic; `work` and `deadline` are touched only on the loop thread once scheduled
    // (they are written on the creating thread before the hand-off through the loop's queue).
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    var work: (@Sendable () -> Void)?
    /// Nanoseconds on the monotonic clock.
    var deadline: UInt64
    /// Nanoseconds between runs; 0 for a one-shot timer.
    let interval: UInt64
    /// Whether the loop's heap holds an entry for it (loop thread only).
    var inHeap = false
    /// Run once, instead of `work`, if the loop shuts down while the timer is pending
    /// (a timer signal tells its subscriber); cleared when the timer ends either way.
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

/// The loop's timers: a 4-ary min-heap ordered by (deadline, submission order), driven by one libuv timer.
///
/// Every scheduled item used to own a `uv_timer_t`: two allocations, libuv's
/// pointer-linked heap, and a close callback per timer. Here an item is one
/// small object and a 24-byte heap entry, the heap is a contiguous array, and
/// a single `uv_timer_t` is armed for the earliest deadline. Cancelled items
/// stay in the heap until they surface or until more than half the heap is
/// cancelled (then it is rebuilt).
///
/// Thread rule: loop thread only.
struct TimerQueue {
    private struct Entry {
        var deadline: UInt64
        var sequence: UInt64
        var timer: Unmanaged<ScheduledTimer>

        func precedes(_ other: Entry) -> Bool {
            deadline < other.deadline || (deadline == other.deadline && sequence < other.sequence)
        }
    }

    private var heap: [Entry] = []
    private var nextSequence: UInt64 = 0
    /// Entries in the heap whose timer was cancelled.
    private(set) var cancelledCount = 0

    var isEmpty: Bool { heap.isEmpty }
    var liveCount: Int { heap.count - cancelledCount }
    var earliestDeadline: UInt64? { heap.first?.deadline }

    /// Adds a timer (retaining it) at its current deadline.
    mutating func push(_ timer: ScheduledTimer) {
        timer.inHeap = true
        let entry = Entry(deadline: timer.deadline, sequence: nextSequence, timer: .passRetained(timer))
        nextSequence &+= 1
        heap.append(entry)
        siftUp(heap.count - 1)
    }

    /// Removes and returns the earliest timer if it is due at `now`; the caller owns the returned reference.
    mutating func popDue(at now: UInt64) -> ScheduledTimer? {
        guard let first = heap.first, first.deadline <= now else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
        let timer = first.timer.takeRetainedValue()
        timer.inHeap = false
        // An entry whose closure is gone was counted by noteCancelled().
        if timer.work == nil { cancelledCount -= 1 }
        return timer
    }

    /// Records that a timer in the heap was cancelled (its closure already dropped); rebuilds the heap when mostly dead.
    mutating func noteCancelled() {
        cancelledCount += 1
        if cancelledCount > 64 && cancelledCount * 2 > heap.count { removeCancelled() }
    }

    /// Drops every cancelled entry and restores the heap order (O(n)).
    mutating func removeCancelled() {
        var kept: [Entry] = []
        kept.reserveCapacity(heap.count - cancelledCount)
        for entry in heap {
            let timer = entry.timer.takeUnretainedValue()
            if timer.work == nil {
                timer.inHeap = false
                entry.timer.release()
            } else {
                kept.append(entry)
            }
        }
        heap = kept
        cancelledCount = 0
        var index = heap.count / 4
        while index >= 0 {
            siftDown(index)
            index -= 1
        }
    }

    /// Takes every live timer out (for shutdown); the caller owns the returned references.
    mutating func removeAll() -> [ScheduledTimer] {
        let timers = heap.map { $0.timer.takeRetainedValue() }
        heap = []
        cancelledCount = 0
        for timer in timers { timer.inHeap = false }
        return timers.filter { $0.work != nil }
    }

    /// The live timers, in no particular order (for reports).
    func liveTimers() -> [ScheduledTimer] {
        heap.map { $0.timer.takeUnretainedValue() }.filter { $0.work != nil && !$0.isCancelled }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let entry = heap[child]
        while child > 0 {
            let parent = (child - 1) / 4
            if !entry.precedes(heap[parent]) { break }
            heap[child] = heap[parent]
            child = parent
        }
        heap[child] = entry
    }

    private mutating func siftDown(_ start: Int) {
        let count = heap.count
        guard start < count else { return }
        var parent = start
        let entry = heap[parent]
        while true {
            let first = parent * 4 + 1
            if first >= count { break }
            var best = first
            let end = min(first + 4, count)
            var candidate = first + 1
            while candidate < end {
                if heap[candidate].precedes(heap[best]) { best = candidate }
                candidate += 1
            }
            if !heap[best].precedes(entry) { break }
            heap[parent] = heap[best]
            parent = best
        }
        heap[parent] = entry
    }
}

extension EventLoop {
    /// Queues a timer on the loop thread (from any thread).
    func startTimer(_ timer: ScheduledTimer) -> (any Disposable)? {
        if inEventLoop {
            guard acceptsNewHandles else {
                reportMisuse(refusal.description)
                return nil
            }
            addTimer(timer)
            return timer
        }
        guard enqueue({ [self] in addTimer(timer) }) else {
            execute {}  // reports the rejection
            return nil
        }
        return timer
    }

    /// Loop thread only.
    private func addTimer(_ timer: ScheduledTimer) {
        assertInEventLoop()
        if timer.isCancelled || !acceptsNewHandles {
            timer.dropForShutdown()
            return
        }
        timers.push(timer)
        if !firingTimers, timer.deadline < armedDeadline { armTimerDriver() }
    }

    /// Loop thread only: drop a cancelled timer's closure now, and the heap entry when convenient.
    func timerWasCancelled(_ timer: ScheduledTimer) {
        assertInEventLoop()
        guard timer.work != nil else { return }  // already fired, or dropped at shutdown
        timer.work = nil
        timer.onShutdown = nil
        guard timer.inHeap else { return }  // not added yet: addTimer will see the flag
        timers.noteCancelled()
        if timers.liveCount == 0 {
            // Nothing live is left: clear the heap so a cancelled far-future timer
            // does not keep the driver armed (and an owner-thread run() from returning).
            timers.removeCancelled()
            armTimerDriver()
        }
    }

    /// The driver's callback: runs every timer due now, in deadline order.
    ///
    /// At most 16,384 per call; the rest continue from the run queue on the next
    /// iteration (never by restarting the driver with 0 ms from its own callback).
    func fireDueTimers() {
        assertInEventLoop()
        firingTimers = true
        let now = SchedulerInstant.now.nanoseconds
        var budget = 16_384
        var more = false
        while let timer = timers.popDue(at: now) {
            guard let work = timer.work, !timer.isCancelled else { continue }
            if timer.interval == 0 {
                timer.work = nil
                timer.onShutdown = nil
            } else {
                // The next deadline is the first start + k·interval still ahead: a
                // blocked loop coalesces missed ticks instead of bursting.
                timer.deadline &+= timer.interval
                if timer.deadline <= now {
                    timer.deadline &+= ((now - timer.deadline) / timer.interval + 1) &* timer.interval
                }
                timers.push(timer)
            }
            work()
            budget -= 1
            if budget == 0 {
                more = timers.earliestDeadline.map { $0 <= now } ?? false
                break
            }
        }
        firingTimers = false
        if more { _ = enqueue { [self] in fireDueTimers() } }
        armTimerDriver(fromDriverCallback: true)
    }

    /// Arms the driver for the earliest deadline (rounded up to libuv's milliseconds), or stops it.
    ///
    /// From the driver's own callback the timeout is at least 1 ms: restarting a libuv
    /// timer with 0 ms from its callback would run it again in the same pass, forever.
    func armTimerDriver(fromDriverCallback: Bool = false) {
        assertInEventLoop()
        let driver = timerDriverHandle
        guard let deadline = timers.earliestDeadline, acceptsNewHandles else {
            armedDeadline = .max
            uvCheckReporting(uv_timer_stop(driver), "uv_timer_stop")
            return
        }
        armedDeadline = deadline
        let loopNow = uv_now(uvLoop) &* 1_000_000
        var timeout: UInt64 = deadline <= loopNow ? 0 : (deadline - loopNow + 999_999) / 1_000_000
        if fromDriverCallback && timeout == 0 { timeout = 1 }
        uvCheckReporting(uv_timer_start(driver, timerDriverCallback, timeout, 0), "uv_timer_start")
    }

    /// Shutdown: drops every pending timer without running it; timers behind a signal tell their subscriber.
    func cancelAllTimers() {
        assertInEventLoop()
        let pending = timers.removeAll()
        armedDeadline = .max
        for timer in pending { timer.dropForShutdown() }
    }

    /// Pending timers, as open handles for reports.
    func pendingTimerHandles() -> [OpenHandle] {
        timers.liveTimers().map { OpenHandle(kind: "timer", label: $0.label, isActive: true, isReferenced: true) }
    }
}

let timerDriverCallback: uv_timer_cb = { handle in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().fireDueTimers()
}

/// The loop's timers: a 4-ary min-heap ordered by (deadline, submission order), driven by one
/// libuv timer. Cancelled items stay until they surface or more than half the heap is cancelled.
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

    /// Pops cancelled timers off the top, so `earliestDeadline` is a live one's (a simulation jumps to it).
    mutating func dropCancelledAtTop() {
        // Asked before every simulated callback: the top is looked at without a retain.
        while let first = heap.first, first.timer._withUnsafeGuaranteedRef({ $0.work == nil || $0.isCancelled }) {
            _ = popDue(at: first.deadline)
        }
    }

    /// Records that a timer in the heap was cancelled; rebuilds the heap when mostly dead.
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

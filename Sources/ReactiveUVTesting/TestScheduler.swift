import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// A scheduler on a virtual clock, for testing operators without real time (RAC's `RACTestScheduler`).
///
/// Work runs only when the test advances the clock, on the calling thread, in deadline order (same
/// deadline: submission order). While it runs work it is `Scheduler.current`, so subscriptions made
/// inside live on virtual time too; `performAsCurrent(_:)` does the same for the test body.
///
/// Thread rule: scheduling is safe from any thread; advancing runs work on the calling thread.
public final class TestScheduler: Scheduler, @unchecked Sendable {
    // Sendable: `state` is behind its lock; work runs outside it.
    private struct Item {
        let deadline: UInt64
        let sequence: UInt64
        let interval: UInt64
        let token: Token
        let work: @Sendable () -> Void
    }

    private struct State {
        var now: UInt64
        var nextSequence: UInt64 = 0
        var queue: [Item] = []  // sorted by (deadline, sequence)
        var ran = 0

        mutating func insert(_ item: Item) {
            var low = 0, high = queue.count
            while low < high {
                let mid = (low + high) / 2
                let other = queue[mid]
                if (other.deadline, other.sequence) <= (item.deadline, item.sequence) { low = mid + 1 } else { high = mid }
            }
            queue.insert(item, at: low)
        }
    }

    private let state: Locked<State>

    /// Creates a scheduler whose clock starts at `start` (zero by default), with no work queued.
    ///
    /// Thread rule: safe from any thread.
    public init(start: SchedulerInstant = SchedulerInstant(nanoseconds: 0)) {
        state = Locked(State(now: start.nanoseconds))
        super.init()
    }

    /// The virtual time.
    ///
    /// Thread rule: safe from any thread.
    public override var now: SchedulerInstant { SchedulerInstant(nanoseconds: state.withLock { $0.now }) }

    /// `"test scheduler"`.
    ///
    /// Thread rule: safe from any thread.
    public override var schedulerDescription: String { "test scheduler" }

    /// Queues `work` at the current virtual time; the disposable cancels it.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        enqueue(delay: 0, interval: 0, work)
    }

    /// Queues `work` at now + `delay` (virtual time; negative counts as zero); the disposable cancels it.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        enqueue(delay: delay.clampedNanoseconds, interval: 0, work)
    }

    /// Queues `work` at now + `delay`, then every `interval` (at least 1 ns) of virtual time, without
    /// drift; `leeway` is ignored. The disposable stops it.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(
        after delay: Duration,
        repeatingEvery interval: Duration,
        leeway: Duration = .zero,
        _ work: @escaping @Sendable () -> Void
    ) -> (any Disposable)? {
        enqueue(delay: delay.clampedNanoseconds, interval: max(1, interval.clampedNanoseconds), work)
    }

    private func enqueue(delay: UInt64, interval: UInt64, _ work: @escaping @Sendable () -> Void) -> any Disposable {
        let token = Token()
        state.withLock { state in
            let (deadline, overflow) = state.now.addingReportingOverflow(delay)
            state.insert(Item(deadline: overflow ? .max : deadline, sequence: state.nextSequence,
                              interval: interval, token: token, work: work))
            state.nextSequence += 1
        }
        return token
    }

    /// The number of queued items (cancelled ones included until their time comes).
    ///
    /// Thread rule: safe from any thread.
    public var pendingCount: Int { state.withLock { $0.queue.count } }

    /// How many items have run so far.
    ///
    /// Thread rule: safe from any thread.
    public var executedCount: Int { state.withLock { $0.ran } }

    /// Runs `body` with this scheduler as `Scheduler.current`, so subscriptions made in it live on virtual time.
    ///
    /// Thread rule: on the thread that advances this scheduler.
    @discardableResult
    public func performAsCurrent<R>(_ body: () throws -> R) rethrows -> R {
        try runAsCurrentScheduler { () throws -> R in try body() }
    }

    /// Moves the clock forward by `duration` (negative counts as zero), running every item due on the way, in order.
    ///
    /// Thread rule: runs work on the calling thread.
    public func advance(by duration: Duration) {
        let target = state.withLock { s -> UInt64 in
            let (t, overflow) = s.now.addingReportingOverflow(duration.clampedNanoseconds)
            return overflow ? .max : t
        }
        advance(to: SchedulerInstant(nanoseconds: target))
    }

    /// Moves the clock forward to `instant` (ignored if earlier than now), running every item due up to it, in order.
    ///
    /// Thread rule: runs work on the calling thread.
    public func advance(to instant: SchedulerInstant) {
        while runNext(upTo: instant.nanoseconds) {}
        state.withLock { s in if s.now < instant.nanoseconds { s.now = instant.nanoseconds } }
    }

    /// Runs items until none is left, moving the clock to each one's deadline; at most `limit`
    /// (repeating work never ends), the rest staying queued. Returns how many ran.
    ///
    /// Thread rule: runs work on the calling thread.
    @discardableResult
    public func run(limit: Int = 1_000_000) -> Int {
        var count = 0
        while count < limit, runNext(upTo: .max) { count += 1 }
        return count
    }

    /// Runs the next `count` items (RAC's `step:`), moving the clock to each one's deadline; returns
    /// how many ran (fewer if the queue emptied).
    ///
    /// Thread rule: runs work on the calling thread.
    @discardableResult
    public func step(_ count: Int = 1) -> Int {
        var ran = 0
        while ran < count, runNext(upTo: .max) { ran += 1 }
        return ran
    }

    /// Runs the earliest item due at or before `limit`; false if there is none.
    private func runNext(upTo limit: UInt64) -> Bool {
        let next = state.withLock { s -> Item? in
            while let first = s.queue.first, first.deadline <= limit {
                s.queue.removeFirst()
                if first.token.isDisposed { continue }
                if first.deadline > s.now { s.now = first.deadline }
                s.ran += 1
                if first.interval > 0 {
                    let (deadline, overflow) = first.deadline.addingReportingOverflow(first.interval)
                    if !overflow {
                        s.insert(Item(deadline: deadline, sequence: s.nextSequence, interval: first.interval,
                                      token: first.token, work: first.work))
                        s.nextSequence += 1
                    }
                }
                return first
            }
            return nil
        }
        guard let next else { return false }
        runAsCurrentScheduler { () -> Void in next.work() }
        return true
    }

    /// Cancels one queued item.
    private final class Token: Disposable, @unchecked Sendable {
        // Sendable: `cancelled` is behind its lock.
        private let cancelled = Locked(false)
        func dispose() { cancelled.withLock { $0 = true } }
        var isDisposed: Bool { cancelled.withLock { $0 } }
    }
}

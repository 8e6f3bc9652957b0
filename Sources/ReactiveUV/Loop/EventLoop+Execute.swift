internal import CLibUV

// Queued work: `execute` from the loop thread into the local run queue, from any other into the inbox.
extension EventLoop {
    // MARK: - execute

    /// Runs `work` on the loop thread, after the work already queued.
    ///
    /// From the loop thread it runs after the current callback returns, in submission order. After
    /// shutdown the work is not run and a message says so on standard error (`tryExecute` throws instead).
    ///
    /// Thread rule: safe from any thread.
    public func execute(_ work: consuming @escaping @Sendable () -> Void) {
        // Consumed into the queue: the caller's reference is the queue's, with no retain and release around it.
        if !enqueue(consume work) { reportRejected() }
    }

    /// Runs `work` on the loop thread, or throws if the loop has shut down.
    ///
    /// - Throws: `EventLoopError.shutDown` when the loop no longer accepts work.
    ///
    /// Thread rule: safe from any thread.
    public func tryExecute(_ work: consuming @escaping @Sendable () -> Void) throws(EventLoopError) {
        if !enqueue(consume work) { throw refusal }
    }

    /// Queues work; false when the loop no longer accepts it.
    @discardableResult
    func enqueue(_ work: consuming @escaping @Sendable () -> Void) -> Bool {
        enqueueItem(.closure(consume work)) == .accepted
    }

    /// What happened to a submission.
    enum Submission {
        case accepted
        /// Refused: the loop has closed.
        case closed
        /// Refused (only when asked with `refusingIdle`): an owner-thread loop outside `run()`.
        case idle
    }

    /// Queues a closure or a job. The state check and the append are one critical section,
    /// so accepted work always runs on the loop thread.
    @inline(__always)
    func enqueueItem(_ work: consuming WorkItem, refusingIdle: Bool = false) -> Submission {
        if inEventLoop {
            // Only this thread moves the state to `.closed`: a relaxed read is exact here.
            guard state.load(ordering: .relaxed) != .closed else { return .closed }
            localQueue.push(work)
            startIdleIfNeeded()
            return .accepted
        }
        return enqueueFromOtherThread(work, refusingIdle: refusingIdle)
    }

    /// `enqueueItem` from a thread that is not the loop's: into the inbox, waking the loop if it sleeps.
    @inline(never)
    private func enqueueFromOtherThread(_ work: consuming WorkItem, refusingIdle: Bool) -> Submission {
        // Straight-line under the spin lock (no closure): the item is moved into the queue.
        inboxLock.lock()
        let current = state.load(ordering: .relaxed)
        guard current != .closed, !(refusingIdle && current == .idle) else {
            inboxLock.unlock()
            return current == .closed ? .closed : .idle
        }
        inbox.items.push(work)
        if virtualClock != nil { markSimulationStale() }
        let wake = claimWakeup()
        inboxLock.unlock()
        if wake { sendWakeup() }
        return .accepted
    }

    /// Under `inboxLock`: whether the caller must wake the (sleeping) loop, claiming that duty.
    /// Senders are counted so the closing transition can wait for them before closing the async handle.
    @inline(__always)
    func claimWakeup() -> Bool {
        if inbox.loopAwake { return false }
        inbox.loopAwake = true
        inbox.wakeupsSent += 1
        sendersInFlight.wrappingAdd(1, ordering: .relaxed)
        return true
    }

    /// Sends the wake-up outside the lock, so producers never queue behind the system call.
    func sendWakeup() {
        uvCheckReporting(uv_async_send(wakeup), "uv_async_send")
        sendersInFlight.wrappingSubtract(1, ordering: .releasing)
    }

    private func reportRejected() {
        let count = withInbox { inbox -> Int in
            inbox.rejectedCount += 1
            return inbox.rejectedCount
        }
        // Every rejection is counted; the first few are spelled out.
        if count <= 10 {
            reportMisuse("\(refusal) (rejected submission #\(count))")
        }
    }

    /// How many submissions were refused because the loop had shut down.
    ///
    /// Thread rule: safe from any thread.
    public var rejectedSubmissionCount: Int { withInbox { $0.rejectedCount } }

    /// How many times another thread woke the loop; submissions share a wake-up until the loop drains.
    ///
    /// Thread rule: safe from any thread.
    public var crossThreadWakeupCount: Int { withInbox { $0.wakeupsSent } }

    /// How many work items other threads queued that the loop has not started yet.
    ///
    /// Work queued on the loop thread is not counted. Sampled as `reactiveuv_loop_queued_work`
    /// when metrics are on.
    ///
    /// Thread rule: safe from any thread (a snapshot; it may change at once).
    public var queuedWorkCount: Int { withInbox { $0.items.count } }
}

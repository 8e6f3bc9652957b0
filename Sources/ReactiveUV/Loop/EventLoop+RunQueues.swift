internal import CLibUV

/// The loop thread's two run queues: the inbox other threads fill (drained from the async
/// handle, then polled from the idle handle while batches keep coming) and the local queue
/// the loop thread fills for itself. The order work runs in: docs/INTERNALS.md.
extension EventLoop {
    /// Runs what other threads queued; also where a shutdown or `stop()` from another thread is noticed.
    func drainInbox() {
        // One batch per iteration. While batches keep arriving the loop stays marked awake and polls
        // from its idle handle, so producers send no wake-up; an empty look marks it asleep again.
        let (stop, closeRequested) = withInbox { inbox -> (Bool, Bool) in
            Swift.swap(&inbox.items, &draining)
            if draining.isEmpty { inbox.loopAwake = false }
            return (inbox.stopRequested, state.load(ordering: .relaxed) == .closeRequested)
        }
        pollingInbox = !draining.isEmpty
        if pollingInbox {
            while let work = draining.pop() { work.run(on: self) }
            startIdleIfNeeded()
        }
        if closeRequested { beginClosing() }
        // The request itself is taken by the decision after uv_run returns (`stepAfterUVRun`).
        if stop { uv_stop(uvLoop) }
    }

    @inline(__always)
    func startIdleIfNeeded() {
        if !idleStarted { startIdle() }
    }

    @inline(never)
    private func startIdle() {
        idleStarted = true
        uvCheckReporting(uv_idle_start(idle, eventLoopIdleCallback), "uv_idle_start")
    }

    /// The idle handle's callback: the local run queue, and the remote one while it is busy.
    func onIdle() {
        drainLocalQueue()
        if pollingInbox { drainInbox() }
        if localQueue.isEmpty && !pollingInbox && idleStarted {
            idleStarted = false
            uvCheckReporting(uv_idle_stop(idle), "uv_idle_stop")
        }
    }

    /// Runs what the loop thread queued for itself, at most 4096 items a turn so work that
    /// requeues itself cannot starve I/O.
    func drainLocalQueue() {
        var ran = 0
        while ran < 4096, let work = localQueue.pop() {
            work.run(on: self)
            ran += 1
        }
    }

    /// Runs queued work until both queues are empty (bounded, in case work keeps requeueing).
    func runQueuedWork() {
        var rounds = 0
        while rounds < 1000 {
            let remote = withInbox { inbox -> Bool in
                Swift.swap(&inbox.items, &draining)
                return !draining.isEmpty
            }
            if remote {
                while let work = draining.pop() { work.run(on: self) }
            }
            if localQueue.isEmpty && !remote { break }
            drainLocalQueue()
            rounds += 1
        }
    }

    /// Runs the batch a transition took out of the inbox into `draining`, then the local queue.
    func runTakenWork() {
        while let work = draining.pop() { work.run(on: self) }
        drainLocalQueue()
    }
}

/// The async handle's callback: another thread queued work or asked for a shutdown.
let eventLoopWakeupCallback: uv_async_cb = { handle in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().drainInbox()
}

let eventLoopIdleCallback: uv_idle_cb = { handle in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().onIdle()
}

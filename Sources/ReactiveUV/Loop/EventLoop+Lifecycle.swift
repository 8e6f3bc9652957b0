internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension EventLoop {
    /// Starts the loop's own thread; the thread holds a retain on the loop until it ends.
    func startThread() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { argument in
            let loop = Unmanaged<EventLoop>.fromOpaque(argument!).takeRetainedValue()
            loop.threadMain()
            return nil
        }, context)
        thread = tid
        if rc != 0 { startThreadFailed(rc, context: context) }
    }

    /// `pthread_create` failed (from the initializer): the loop becomes one that could not start.
    private func startThreadFailed(_ code: Int32, context: UnsafeMutableRawPointer) {
        Unmanaged<EventLoop>.fromOpaque(context).release()
        startFailure = UVError(code: -code, context: "pthread_create for EventLoop '\(name)'")
        withInbox { _ in state.store(.closed, ordering: .releasing) }
        metricsSampler?.destroy()
        abandonStart(loopInitialized: true)
    }

    private func threadMain() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        ThreadLocals.currentLoop.set(me)
        ThreadLocals.currentScheduler.set(me)
        ruv_set_current_thread_name(String(decoding: "uv-\(name)".utf8.prefix(15), as: UTF8.self))
        startMetricsProbe()
        if !isShared { EventLoop.threadLoopsRunning.add(1, ordering: .relaxed) }
        // Returns only once the loop has closed: its own thread has nothing else to do.
        drive()
        if !isShared { EventLoop.threadLoopsRunning.subtract(1, ordering: .relaxed) }
    }

    // MARK: - owner-thread loops

    /// Runs an owner-thread loop on the calling thread until nothing is left to do, `stop()` is called, or it shuts down.
    ///
    /// "Nothing left to do" means no active handle and no queued work. A `shutdown()` requested
    /// meanwhile is finished before it returns.
    ///
    /// Thread rule: only on the thread that made the loop with `onCurrentThread()`.
    public func run() {
        guard virtualClock == nil else {
            reportMisuse("EventLoop '\(name)' is simulated: its simulation runs it (run(for:), runUntilIdle()), not run()")
            return
        }
        guard !ownsThread else {
            reportMisuse("EventLoop '\(name)' runs on its own thread: run() is only for loops made with EventLoop.onCurrentThread()")
            return
        }
        guard inEventLoop else {
            reportMisuse(EventLoopError.notRunningOnOwnerThread(operation: "run()", loop: name).description)
            return
        }
        switch transitionEnterRun() {
        case .closed:
            reportMisuse(refusal.description)
            return
        case .running:
            reportMisuse("run() was called on EventLoop '\(name)' from inside its own run(): it is already running")
            return
        case .idle, .closeRequested, .closingHandles, .draining:
            break
        }
        warnIfNothingToRun()
        // Time outside run() is neither lag nor busy time: each run starts a fresh interval.
        startMetricsProbe()
        drive()
    }

    private func warnIfNothingToRun() {
        if let note = nothingToRunNote() { reportMisuse(note) }
    }

    /// Why `run()` would return at once while loops on threads of their own run (the program's
    /// work lives there and `run()` does not wait for it); nil otherwise.
    func nothingToRunNote() -> String? {
        let others = EventLoop.threadLoopsRunning.load(ordering: .relaxed)
        guard others > 0, !uvIsAlive, localQueue.isEmpty, withInbox({ $0.items.isEmpty }) else { return nil }
        return "EventLoop '\(name)'.run() has nothing to do and returns at once, while \(others) loop(s) on threads of "
            + "their own run: it does not wait for work on other loops. To wait for a server on a group, use "
            + "Program.run(server, shuttingDown: group) (or server.waitUntilCompleted())"
    }

    /// Makes `run()` return after the current callback (owner-thread loops).
    ///
    /// Thread rule: safe from any thread.
    public func stop() {
        guard !ownsThread else {
            reportMisuse("EventLoop '\(name)' runs on its own thread: use shutdown(), not stop()")
            return
        }
        transitionRequestStop()
    }

    // MARK: - shutdown

    /// Closes every handle still open, runs their close callbacks, checks `uv_loop_close` and ends the loop's thread.
    ///
    /// Work accepted before the loop's final look at its queue runs first; later work is refused.
    /// Signals with open handles tell their subscribers the loop shut down. Calling it again does
    /// nothing. Problems go to standard error; `tryShutdown()` throws them instead.
    ///
    /// - On a thread that is no loop's: waits until the loop has closed and its thread ended.
    /// - On the loop's own thread: starts the shutdown, which completes when the current callback returns.
    /// - On another loop's thread: starts the shutdown and returns without waiting.
    ///
    /// Thread rule: safe from any thread.
    public func shutdown() {
        do {
            try tryShutdown()
        } catch EventLoopError.calledOnLoopThread(let operation, let loop) {
            // A loop thread never waits: start the shutdown and let this loop's thread finish it.
            if transitionRequestClose(allowIdle: false) == .idle {
                // An owner-thread loop outside run(), asked from another loop's thread.
                reportMisuse(EventLoopError.notRunningOnOwnerThread(operation: "shutdown()", loop: name).description)
            }
            if loop == name && inEventLoop {
                reportMisuse("\(operation) was called on EventLoop '\(loop)''s own thread: the shutdown will complete when the current callback returns (the thread cannot wait for itself)")
            }
        } catch {
            reportMisuse(error.description)
        }
    }

    /// Shuts the loop down like `shutdown()`, throwing instead of writing messages.
    ///
    /// - Returns: What the shutdown found open and what `uv_loop_close` returned.
    /// - Throws: `EventLoopError.calledOnLoopThread` on any loop's thread (nothing is done),
    ///   `.sharedLoopCannotShutDown` for `EventLoop.shared`, `.notRunningOnOwnerThread` for an
    ///   owner-thread loop asked from another thread while not running, `.loopCloseFailed`.
    ///
    /// Thread rule: safe from any thread that is not a loop's (an owner-thread loop's own
    /// thread may call it outside `run()`).
    @discardableResult
    public func tryShutdown() throws(EventLoopError) -> ShutdownReport {
        // A loop that could not start has nothing to close: it was closed from the beginning.
        if startFailure != nil { return try finishedReport() }
        if isShared { throw EventLoopError.sharedLoopCannotShutDown }
        if inEventLoop {
            let current = state.load(ordering: .relaxed)
            // Called again after the owner thread shut its loop down: nothing to do.
            if current == .closed { return try finishedReport() }
            if ownsThread || current != .idle {
                throw EventLoopError.calledOnLoopThread(operation: "shutdown()", loop: name)
            }
            // The owner thread, outside run(): close everything right here.
            if transitionRequestClose(allowIdle: true) != .closed { drive() }
            return try finishedReport()
        }
        if let current = EventLoop.current {
            throw EventLoopError.calledOnLoopThread(operation: "shutdown() of EventLoop '\(name)'", loop: current.name)
        }
        // Nobody else drives a simulated loop: its shutdown runs here, as its callbacks do.
        if virtualClock != nil { return try shutDownSimulated() }
        let found = transitionRequestClose(allowIdle: false)
        if found == .idle {
            // Nobody is running the loop to carry the shutdown out.
            throw EventLoopError.notRunningOnOwnerThread(operation: "shutdown()", loop: name)
        }
        if ownsThread && !joinClaimed.exchange(true, ordering: .acquiringAndReleasing) {
            pthread_join(thread, nil)
        }
        finished.wait()
        return try finishedReport()
    }

    func finishedReport() throws(EventLoopError) -> ShutdownReport {
        let report = self.report ?? ShutdownReport(closedHandles: [], loopCloseResult: 0)
        if report.loopCloseResult != 0 {
            throw EventLoopError.loopCloseFailed(loop: name, error: UVError(code: report.loopCloseResult, context: "uv_loop_close"))
        }
        return report
    }

    func runUV() {
        // Non-zero only means handles are still active after uv_stop.
        _ = uv_run(uvLoop, UV_RUN_DEFAULT)
    }

    /// Whether libuv still has handles or requests (closing ones included).
    var uvIsAlive: Bool { uv_loop_alive(uvLoop) != 0 }

    // MARK: - driving the loop through its life

    /// What the loop thread does after `uv_run` returned (see `stepAfterUVRun`).
    enum StepAfterUVRun {
        /// Run libuv again (it has work, or the state asks for the next stage first).
        case runAgain
        /// Run the batch the step took out of the inbox, then libuv again.
        case runWork
        /// `run()` returns: the loop is `.idle` again (after running the batch taken, if any).
        case leave
        /// The loop is `.closed`: close its own handles and `uv_loop_close`.
        case close
    }

    /// Runs libuv until the loop has closed or, for an owner-thread loop, until `run()` should return.
    func drive() {
        while true {
            if state.load(ordering: .relaxed) == .closeRequested { beginClosing() }
            runUV()
            if !ownsThread, let hook = beforeLeavingRunForTesting { hook() }
            switch stepAfterUVRun() {
            case .runAgain:
                continue
            case .runWork:
                runTakenWork()
            case .leave:
                runTakenWork()
                return
            case .close:
                finishClosing()
                return
            }
        }
    }

    // MARK: - the transitions (the only code that writes `state`, always under `inboxLock`)

    /// `run()` begins: `.idle` → `.running`. Returns the state found.
    func transitionEnterRun() -> LoopState {
        withInbox { _ in
            let found = state.load(ordering: .relaxed)
            if found == .idle { state.store(.running, ordering: .releasing) }
            return found
        }
    }

    /// `shutdown()`: `.running` (or `.idle` with `allowIdle`, the owner thread outside `run()`)
    /// → `.closeRequested`, and wakes the loop so it notices. Returns the state found.
    @discardableResult
    func transitionRequestClose(allowIdle: Bool) -> LoopState {
        var wake = false
        let found = withInbox { _ -> LoopState in
            let found = state.load(ordering: .relaxed)
            if found == .running || (found == .idle && allowIdle) {
                state.store(.closeRequested, ordering: .releasing)
                if virtualClock != nil { markSimulationStale() }
                wake = claimWakeup()
            }
            return found
        }
        if wake { sendWakeup() }
        return found
    }

    /// `stop()` (owner-thread loops): noted in the inbox and taken by `stepAfterUVRun`.
    func transitionRequestStop() {
        let onLoop = inEventLoop
        var wake = false
        withInbox { inbox in
            let current = state.load(ordering: .relaxed)
            guard current == .running || current == .idle else { return }
            inbox.stopRequested = true
            if virtualClock != nil { markSimulationStale() }
            if !onLoop { wake = claimWakeup() }
        }
        if onLoop {
            uv_stop(uvLoop)
        } else if wake {
            sendWakeup()
        }
    }

    /// The one decision after `uv_run` returned: run again, run what other threads queued,
    /// leave `run()` (`.running` → `.idle`), or close (`.draining` → `.closed`).
    ///
    /// Leaving and closing share a critical section with the last look at the inbox, so every
    /// submission is either taken here or refused by the new state, never stranded.
    func stepAfterUVRun() -> StepAfterUVRun {
        // Loop-thread facts, read before taking the lock (no call out under it).
        let alive = uvIsAlive
        let localWork = !localQueue.isEmpty
        return withInbox { inbox in
            let current = state.load(ordering: .relaxed)
            switch current {
            case .running where ownsThread:
                // A loop's own thread holds a referenced wake-up handle: uv_run returned only for uv_stop.
                return .runAgain
            case .running:
                if inbox.stopRequested {
                    inbox.stopRequested = false
                    state.store(.idle, ordering: .releasing)
                    // Accepted while running: run it before returning.
                    Swift.swap(&inbox.items, &draining)
                    return .leave
                }
                if !inbox.items.isEmpty {
                    Swift.swap(&inbox.items, &draining)
                    return .runWork
                }
                if alive || localWork { return .runAgain }
                state.store(.idle, ordering: .releasing)
                return .leave
            case .closeRequested, .closingHandles:
                // `drive` begins closing before it runs libuv again.
                return .runAgain
            case .draining:
                if !inbox.items.isEmpty {
                    Swift.swap(&inbox.items, &draining)
                    return .runWork
                }
                if alive || localWork { return .runAgain }
                state.store(.closed, ordering: .releasing)
                return .close
            case .idle, .closed:
                preconditionFailure("EventLoop '\(name)': uv_run returned in state \(current)")
            }
        }
    }

    /// Moves from `from` to `to` (loop thread: the closing stages); false if the state was not `from`.
    private func transition(from: LoopState, to: LoopState) -> Bool {
        withInbox { _ in
            guard state.load(ordering: .relaxed) == from else { return false }
            state.store(to, ordering: .releasing)
            return true
        }
    }

    // MARK: - closing

    /// `.closeRequested` → `.closingHandles` → `.draining`: runs accepted work, closes every
    /// handle (ours first, so they tell their subscribers), cancels timers and requests.
    func beginClosing() {
        assertInEventLoop()
        guard transition(from: .closeRequested, to: .closingHandles) else { return }
        runQueuedWork()
        let openAtShutdown = collectOpenHandles()
        // Requests keep uv_run going until they call back; cancel what has not started.
        requests.cancelAllForShutdown()
        // Pending timers never run; those behind a signal and this loop's time operators tell their
        // subscribers now, while work they queue can still run.
        shutdownObservers.fireAll()
        cancelAllTimers()
        var rounds = 0
        while let owner = openHandleList.first, rounds < 1_000_000 {
            owner.closeForShutdown()
            rounds += 1
            if openHandleList.isEmpty { runQueuedWork() }
        }
        uv_walk(uvLoop, { handle, argument in
            guard let handle, let argument else { return }
            let loop = Unmanaged<EventLoop>.fromOpaque(argument).takeUnretainedValue()
            if loop.isInternal(handle) || uv_is_closing(handle) != 0 { return }
            // Not ours: its owner frees it; we can only close it so the loop can end.
            uv_close(handle, nil)
        }, Unmanaged.passUnretained(self).toOpaque())
        cancelAllTimers()
        pendingReport = openAtShutdown
        // No timer can be added from here on: the driver and the metrics probe close now.
        uv_close(UnsafeMutableRawPointer(timerDriverHandle).assumingMemoryBound(to: uv_handle_t.self), nil)
        closeMetricsProbeForShutdown()
        _ = transition(from: .closingHandles, to: .draining)
        // The wake-up handle stays open for other threads' work but no longer keeps uv_run going.
        uv_unref(UnsafeMutableRawPointer(wakeup).assumingMemoryBound(to: uv_handle_t.self))
    }

    /// After `.closed`: closes the loop's own handles, runs `uv_loop_close`, writes the report and opens `finished`.
    private func finishClosing() {
        // No sender can start now (the state refuses them); wait out any still inside uv_async_send.
        while sendersInFlight.load(ordering: .acquiring) != 0 { sched_yield() }
        uv_close(UnsafeMutableRawPointer(wakeup).assumingMemoryBound(to: uv_handle_t.self), nil)
        uv_close(UnsafeMutableRawPointer(idle).assumingMemoryBound(to: uv_handle_t.self), nil)
        // One pass runs the close callbacks without waiting (a handle other code opened in the last
        // work would keep it running; uv_loop_close then reports it).
        _ = uv_run(uvLoop, UV_RUN_NOWAIT)
        let result = uv_loop_close(uvLoop)
        if result != 0 {
            let leftovers = (collectOpenHandles().map(\.description) + requests.map(\.label)).joined(separator: ", ")
            reportMisuse("\(EventLoopError.loopCloseFailed(loop: name, error: UVError(code: result, context: "uv_loop_close"))); still open: \(leftovers)")
        }
        report = ShutdownReport(closedHandles: pendingReport, loopCloseResult: result)
        ThreadLocals.currentLoop.set(nil)
        ThreadLocals.currentScheduler.set(nil)
        if !ownsThread {
            // The owner thread's key held a retain (see `onCurrentThread()`).
            Unmanaged.passUnretained(self).release()
        }
        finished.open()
    }
}

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
        precondition(rc == 0, "ReactiveUV could not start a thread for EventLoop '\(name)': pthread_create returned \(rc)")
        thread = tid
    }

    private func threadMain() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        ThreadLocals.currentLoop.set(me)
        ThreadLocals.currentScheduler.set(me)
        ruv_set_current_thread_name(String(decoding: "uv-\(name)".utf8.prefix(15), as: UTF8.self))
        startMetricsProbe()
        // uv_run returns only once shutdown closed the (referenced) wake-up handle,
        // unless something called uv_stop: then simply run again.
        repeat { runUV() } while !closingStarted || uvIsAlive
        ThreadLocals.currentLoop.set(nil)
        ThreadLocals.currentScheduler.set(nil)
        finishClosed()
    }

    // MARK: - owner-thread loops

    /// Runs an owner-thread loop on the calling thread until nothing is left to do, `stop()` is called, or it shuts down.
    ///
    /// "Nothing left to do" means no active handle (timer, socket, watch) and
    /// no queued work. If `shutdown()` was requested (from a callback or
    /// another thread), `run()` finishes the shutdown before returning.
    ///
    /// - Returns: When the loop went idle, was stopped, or shut down.
    ///
    /// Thread rule: only on the thread that made the loop with `onCurrentThread()`.
    public func run() {
        guard !ownsThread else {
            reportMisuse("EventLoop '\(name)' runs on its own thread: run() is only for loops made with EventLoop.onCurrentThread()")
            return
        }
        guard inEventLoop else {
            reportMisuse(EventLoopError.notRunningOnOwnerThread(operation: "run()", loop: name).description)
            return
        }
        var phase = readPhase()
        guard phase == .idle || phase == .closing else {
            if phase == .closed { reportMisuse(EventLoopError.shutDown(loop: name).description) }
            return
        }
        if phase == .idle { setPhase(.running) }
        // Time spent outside run() is neither lag nor busy time: each run starts a fresh interval.
        startMetricsProbe()
        while true {
            runUV()
            phase = readPhase()
            if phase == .closing && !closingStarted {
                drainForRun()
                continue
            }
            if closingStarted {
                if uvIsAlive { continue }
                finishClosed()
                return
            }
            if stopWasRequested {
                stopWasRequested = false
                break
            }
            if hasQueuedWork {
                drainForRun()
                continue
            }
            break
        }
        if readPhase() == .running { setPhase(.idle) }
    }

    /// Makes `run()` return after the current callback (owner-thread loops).
    ///
    /// Thread rule: safe from any thread.
    public func stop() {
        guard !ownsThread else {
            reportMisuse("EventLoop '\(name)' runs on its own thread: use shutdown(), not stop()")
            return
        }
        if inEventLoop {
            stopWasRequested = true
            stopUV()
        } else {
            requestStop()
        }
    }

    // MARK: - shutdown

    /// Closes every handle still open, runs their close callbacks, checks `uv_loop_close` and ends the loop's thread.
    ///
    /// Work already accepted runs first; work submitted afterwards is refused
    /// (with a message, or an error from `tryExecute`). Handles opened by
    /// signals tell their subscribers the loop shut down. Calling it again
    /// does nothing. Problems are written to standard error; `tryShutdown()`
    /// throws them instead.
    ///
    /// - On another thread: waits until the loop's thread has ended.
    /// - On the loop's own thread: cannot wait for itself, so it starts the
    ///   shutdown, which completes when the current callback returns, and says so.
    ///
    /// Thread rule: safe from any thread.
    public func shutdown() {
        do {
            try tryShutdown()
        } catch EventLoopError.calledOnLoopThread(let operation, let loop) {
            // A loop cannot join its own thread: start the shutdown and let the loop finish it.
            _ = requestClosing(wake: true)
            reportMisuse("\(operation) was called on EventLoop '\(loop)''s own thread: the shutdown will complete when the current callback returns (the thread cannot wait for itself)")
        } catch {
            reportMisuse(error.description)
        }
    }

    /// Shuts the loop down like `shutdown()`, throwing instead of writing messages.
    ///
    /// - Returns: What the shutdown found open and what `uv_loop_close` returned.
    /// - Throws: `EventLoopError.calledOnLoopThread` on the loop's own thread
    ///   (nothing is done), `.sharedLoopCannotShutDown` for `EventLoop.shared`,
    ///   `.notRunningOnOwnerThread` for an owner-thread loop asked from another
    ///   thread while not running, `.loopCloseFailed` when `uv_loop_close` fails.
    ///
    /// Thread rule: safe from any thread except the loop's own.
    @discardableResult
    public func tryShutdown() throws(EventLoopError) -> ShutdownReport {
        if isShared { throw EventLoopError.sharedLoopCannotShutDown }
        if inEventLoop {
            if ownsThread || readPhase() == .running {
                throw EventLoopError.calledOnLoopThread(operation: "shutdown()", loop: name)
            }
            // The owner thread, outside run(): close everything right here.
            if requestClosing(wake: false) != .closed {
                drainForRun()
                while uvIsAlive { runUV() }
                finishClosed()
            }
            return try finishedReport()
        }
        if !ownsThread {
            let found = requestClosing(wake: true, allowIdle: false)
            if found == .idle {
                // Nobody is running the loop to carry the shutdown out.
                throw EventLoopError.notRunningOnOwnerThread(operation: "shutdown()", loop: name)
            }
            finished.wait()
            return try finishedReport()
        }
        _ = requestClosing(wake: true)
        if !joinClaimed.exchange(true, ordering: .acquiringAndReleasing) {
            pthread_join(thread, nil)
        }
        finished.wait()
        return try finishedReport()
    }

    private func finishedReport() throws(EventLoopError) -> ShutdownReport {
        let report = self.report ?? ShutdownReport(closedHandles: [], loopCloseResult: 0)
        if report.loopCloseResult != 0 {
            throw EventLoopError.loopCloseFailed(loop: name, error: UVError(code: report.loopCloseResult, context: "uv_loop_close"))
        }
        return report
    }

    /// Runs `uv_run` once in default mode.
    func runUV() {
        // Not an error code: non-zero only means handles are still active after uv_stop.
        _ = uv_run(uvLoop, UV_RUN_DEFAULT)
    }

    /// Whether libuv still has handles or requests (closing ones included).
    var uvIsAlive: Bool { uv_loop_alive(uvLoop) != 0 }

    func stopUV() { uv_stop(uvLoop) }
}

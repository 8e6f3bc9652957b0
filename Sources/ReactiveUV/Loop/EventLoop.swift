internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One libuv loop and the one thread that runs it; also a `Scheduler` (`Scheduler.current` on its thread).
///
/// Every libuv call happens on the loop thread; `execute(_:)` is the thread-safe way in.
/// - `EventLoop()` starts a loop on a thread of its own.
/// - `EventLoop.shared` is the default loop, started on first use and never shut down.
/// - `EventLoop.onCurrentThread()` makes a loop the calling thread drives with `run()`.
///
/// Thread rule: `execute`, `schedule`, `inEventLoop`, `shutdown` are safe from any
/// thread; the handle-level internals are loop thread only.
public final class EventLoop: Scheduler, @unchecked Sendable {
    // Sendable: `inboxLock` (a spin lock, short sections that never call out) guards `inbox`; every
    // other stored var is loop-thread-only, or written before the loop thread starts and never again.

    /// The loop's name, used in thread names and messages.
    ///
    /// Thread rule: safe from any thread.
    public let name: String
    let uvLoop: UnsafeMutablePointer<uv_loop_t>
    let wakeup: UnsafeMutablePointer<uv_async_t>
    let idle: UnsafeMutablePointer<uv_idle_t>
    /// The one libuv timer that drives every scheduled item.
    let timerDriver: UnsafeMutablePointer<uv_timer_t>
    /// The metrics probe timer (unreferenced); nil when metrics are off.
    let metricsProbe: UnsafeMutablePointer<uv_timer_t>?
    /// Metric objects and the previous sample; nil when metrics are off.
    let metricsSampler: LoopMetricsSampler?
    /// Whether the loop runs on a thread it created; false for `EventLoop.onCurrentThread()`.
    ///
    /// Thread rule: safe from any thread.
    public let ownsThread: Bool
    /// Whether this is `EventLoop.shared`, which refuses shutdown (`EventLoopError.sharedLoopCannotShutDown`).
    /// Reading it does not start the shared loop.
    ///
    /// Thread rule: safe from any thread.
    public let isShared: Bool

    /// Where the loop is in its life; written only under `inboxLock`, read anywhere without it.
    let state: Atomic<LoopState>
    /// A simulated loop's readiness may have changed from outside its own callbacks (work from
    /// outside, a state change, a pool job, a callback made by the test): its simulation looks at it
    /// again. Set on those cold paths only, and only for a simulated loop.
    package let simulationStale = Atomic<Bool>(true)

    struct Inbox {
        var items = WorkRing()
        /// `stop()` asked from another thread (owner-thread loops).
        var stopRequested = false
        var rejectedCount = 0
        var wakeupsSent = 0
        /// The loop will look at `items` again before it sleeps (it clears this only after seeing
        /// `items` empty, under the lock), so a producer appending meanwhile sends no wake-up.
        var loopAwake = false
    }
    let inboxLock = SpinLock()
    @exclusivity(unchecked) var inbox: Inbox
    /// Threads between taking a wake-up duty under the lock and finishing `uv_async_send`.
    let sendersInFlight = Atomic<Int>(0)

    // Loop thread only; exclusivity unchecked as no access spans a call that could re-enter it.
    @exclusivity(unchecked) var draining = WorkRing()
    @exclusivity(unchecked) var localQueue = WorkRing()
    @exclusivity(unchecked) var idleStarted = false
    /// The last inbox drain found work, so poll it again next iteration.
    @exclusivity(unchecked) var pollingInbox = false
    @exclusivity(unchecked) var timers = TimerQueue()
    /// The deadline the driver is armed for (`.max` when stopped).
    @exclusivity(unchecked) var armedDeadline: UInt64 = .max
    /// Inside the driver's callback: arming waits until it is done.
    @exclusivity(unchecked) var firingTimers = false
    /// Handles we opened that are not closing yet; shutdown closes them.
    @exclusivity(unchecked) var openHandleList = OpenHandleList()
    /// Pending libuv requests; shutdown cancels them.
    @exclusivity(unchecked) var requests = IntrusiveList<LoopRequestList>()
    /// Run when shutdown begins (time operators on this loop end their subscriptions).
    let shutdownObservers = ShutdownObservers()
    /// Executor jobs enqueued after the loop closed.
    let lateJobs = LateJobQueue()
    /// The loop's serial executor (actors' jobs).
    let serialExecutor = LoopSerialExecutor()
    /// The buffer the loop's streams read into; allocated on first read.
    @exclusivity(unchecked) private var readBufferStorage: UnsafeMutableRawPointer?
    /// The last small chunk handed to a reader, refilled in place once nobody else holds it.
    @exclusivity(unchecked) var spareReadChunk: [UInt8] = []
    /// Memory of finished file-system requests, kept for the next ones: a list linked through each
    /// block's first word.
    @exclusivity(unchecked) var spareFSRequests: UnsafeMutableRawPointer?
    @exclusivity(unchecked) var spareFSRequestCount = 0
    /// What shutdown found open, for the report.
    var pendingReport: [OpenHandle] = []
    // `thread` is written before the thread starts; `report` before `finished` opens.
    var thread = pthread_t()
    let finished = Latch()
    let joinClaimed = Atomic<Bool>(false)
    var report: ShutdownReport?
    /// Called by `run()` just before it decides whether to leave (tests only).
    var beforeLeavingRunForTesting: (() -> Void)?
    /// The virtual clock of a simulated loop (driven by a simulation, not by libuv); nil for a real loop.
    package let virtualClock: VirtualClock?
    /// The network a simulated loop's TCP connections and servers use; nil for a real loop.
    package let simulatedNetwork: SimulatedNetwork?
    /// The in-memory file system a simulated loop's `Files` calls use; nil for a real loop.
    package let simulatedFiles: SimulatedFileSystem?
    /// The programs, standard I/O and signals of a simulated loop's process; nil for a real loop.
    package let simulatedSystem: SimulatedSystem?

    /// The default loop: started on first use, on a thread of its own, never shut down.
    ///
    /// Subscriptions made from threads without a current scheduler start here.
    ///
    /// Thread rule: safe from any thread.
    public static let shared = EventLoop(name: "shared", ownsThread: true, isShared: true)

    /// Starts a loop on a new thread of its own.
    ///
    /// - Parameters:
    ///   - name: A name for the thread, messages and the metrics' `loop` dimension.
    ///   - metrics: Whether the loop reports metrics; nil uses `LoopMetrics.default`.
    /// - Returns: A running loop; call `shutdown()` when done with it.
    ///
    /// Thread rule: safe from any thread.
    public convenience init(name: String = "loop", metrics: LoopMetrics? = nil) {
        self.init(name: name, ownsThread: true, isShared: false, metrics: metrics ?? .default)
    }

    /// Makes a loop owned by the calling thread, which must then call `run()`.
    ///
    /// The calling thread becomes the loop thread, so it must not already own one.
    ///
    /// - Parameters:
    ///   - name: A name for messages and the metrics' `loop` dimension.
    ///   - metrics: Whether the loop reports metrics; nil uses `LoopMetrics.default`. Sampled only while `run()` runs.
    /// - Returns: A loop that is not yet running.
    ///
    /// Thread rule: becomes the calling thread's loop; use it from that thread.
    public static func onCurrentThread(name: String = "main", metrics: LoopMetrics? = nil) -> EventLoop {
        EventLoop(name: name, ownsThread: false, isShared: false, metrics: metrics ?? .default)
    }

    init(name: String, ownsThread: Bool, isShared: Bool, metrics: LoopMetrics = .default,
         virtualClock: VirtualClock? = nil, simulatedNetwork: SimulatedNetwork? = nil, simulatedFiles: SimulatedFileSystem? = nil,
         simulatedSystem: SimulatedSystem? = nil) {
        self.name = name
        self.virtualClock = virtualClock
        self.simulatedNetwork = simulatedNetwork
        self.simulatedFiles = simulatedFiles
        self.simulatedSystem = simulatedSystem
        self.ownsThread = ownsThread
        self.isShared = isShared
        uvLoop = .allocate(capacity: 1)
        wakeup = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(UV_ASYNC), alignment: 16)
            .bindMemory(to: uv_async_t.self, capacity: 1)
        idle = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(UV_IDLE), alignment: 16)
            .bindMemory(to: uv_idle_t.self, capacity: 1)
        timerDriver = UnsafeMutableRawPointer.allocate(byteCount: uv_handle_size(UV_TIMER), alignment: 16)
            .bindMemory(to: uv_timer_t.self, capacity: 1)
        inbox = Inbox()
        // Setup fails only for lack of descriptors or memory: the loop is then made closed and
        // answers every use with `startFailure`.
        var probe: UnsafeMutablePointer<uv_timer_t>?
        var failure: UVError?
        var loopInitialized = false
        do {
            _ = StandardDescriptors.closedAtStart  // before libuv takes descriptors: none of 0, 1, 2
            try EventLoop.checkDescriptorsForLibuvGlobals()
            try uvCheck(uv_loop_init(uvLoop), "uv_loop_init")
            loopInitialized = true
            EventLoop.libuvGlobalsReady.store(true, ordering: .releasing)
            // Idle-time metrics make libuv poll twice per iteration, so only when metrics are on.
            probe = try EventLoop.makeMetricsProbe(for: uvLoop, configuration: metrics)
            try uvCheck(uv_async_init(uvLoop, wakeup, eventLoopWakeupCallback), "uv_async_init")
            try uvCheck(uv_idle_init(uvLoop, idle), "uv_idle_init")
            try uvCheck(uv_timer_init(uvLoop, timerDriver), "uv_timer_init")
        } catch {
            failure = error
        }
        metricsProbe = probe
        state = Atomic(failure != nil ? .closed : ownsThread || virtualClock != nil ? .running : .idle)
        metricsSampler = metrics.isEnabled && failure == nil ? LoopMetricsSampler(loopName: name, configuration: metrics) : nil
        startFailure = failure
        super.init()
        loopLifecycle = self
        serialExecutor.attach(to: self)
        if failure != nil {
            abandonStart(loopInitialized: loopInitialized)
            return
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        wakeup.pointee.data = context
        idle.pointee.data = context
        timerDriver.pointee.data = context
        metricsProbe?.pointee.data = context

        if ownsThread {
            startThread()
        } else if virtualClock != nil {
            // The simulation runs each callback with this loop as the thread's current one; this
            // retain stands for the owner thread's key, which `finishClosing` releases.
            _ = Unmanaged.passRetained(self)
        } else {
            // The key holds a retain, released when the loop finishes, so it never points at a dead loop.
            precondition(ThreadLocals.currentLoop.value == nil,
                         "EventLoop.onCurrentThread(): this thread already owns EventLoop '\(EventLoop.current?.name ?? "?")'")
            uv_unref(UnsafeMutableRawPointer(wakeup).assumingMemoryBound(to: uv_handle_t.self))
            let retained = Unmanaged.passRetained(self).toOpaque()
            ThreadLocals.currentLoop.set(retained)
            ThreadLocals.currentScheduler.set(retained)
        }
    }

    /// Loops running on threads of their own, the shared loop aside (for `run()`'s note).
    static let threadLoopsRunning = Atomic<Int>(0)

    /// Whether libuv's one-time global setup is done (a `uv_loop_init` succeeded).
    private static let libuvGlobalsReady = Atomic<Bool>(false)

    /// libuv 1.44 aborts when its one-time global setup cannot make its signal pipe: check the
    /// descriptors can be had first and answer `EMFILE` instead.
    private static func checkDescriptorsForLibuvGlobals() throws(UVError) {
        if libuvGlobalsReady.load(ordering: .acquiring) { return }
        // Three descriptors, as libuv will take them: a pipe and one more (its epoll instance).
        var pipeEnds: [Int32] = [-1, -1]
        let piped = pipe(&pipeEnds)
        let third = piped == 0 ? dup(pipeEnds[0]) : -1
        let failure: Int32 = piped != 0 || third < 0 ? errno : 0
        if third >= 0 { close(third) }
        if piped == 0 { close(pipeEnds[0]); close(pipeEnds[1]) }
        if failure != 0 {
            throw UVError(code: -failure, message: "no file descriptor left for the loop's first setup",
                          context: "uv_loop_init")
        }
    }

    /// Starts a loop on a new thread of its own, or throws why it could not.
    ///
    /// - Parameters:
    ///   - name: A name for the thread, messages and the metrics' `loop` dimension.
    ///   - metrics: Whether the loop reports metrics; nil uses `LoopMetrics.default`.
    /// - Returns: A running loop; call `shutdown()` when done with it.
    /// - Throws: `EventLoopError.couldNotStart` with the `UVError` that stopped it (e.g. `EMFILE`).
    ///
    /// Thread rule: safe from any thread.
    public static func tryStart(name: String = "loop", metrics: LoopMetrics? = nil) throws(EventLoopError) -> EventLoop {
        let loop = EventLoop(name: name, metrics: metrics)
        if let failure = loop.startFailure { throw EventLoopError.couldNotStart(loop: name, error: failure) }
        return loop
    }

    /// Makes a loop owned by the calling thread (see `onCurrentThread(name:metrics:)`), or throws why it could not.
    ///
    /// - Returns: A loop that is not yet running; the calling thread is its thread.
    /// - Throws: `EventLoopError.couldNotStart` with the `UVError` that stopped it (e.g. `EMFILE`).
    ///
    /// Thread rule: becomes the calling thread's loop; use it from that thread.
    public static func tryOnCurrentThread(name: String = "main", metrics: LoopMetrics? = nil) throws(EventLoopError) -> EventLoop {
        let loop = onCurrentThread(name: name, metrics: metrics)
        if let failure = loop.startFailure { throw EventLoopError.couldNotStart(loop: name, error: failure) }
        return loop
    }

    /// Why the loop could not start, or nil. Such a loop refuses every submission with `EventLoopError.couldNotStart`.
    ///
    /// Thread rule: safe from any thread.
    // Written only in the initializer, before any other thread sees the loop.
    public internal(set) var startFailure: UVError?

    /// `couldNotStart` for a loop that never started, else `shutDown`.
    var refusal: EventLoopError {
        if let startFailure { return .couldNotStart(loop: name, error: startFailure) }
        return .shutDown(loop: name)
    }

    /// Closes what a failed start made and leaves the loop closed with a report, so `shutdown()` returns at once.
    func abandonStart(loopInitialized: Bool) {
        var result: Int32 = 0
        if loopInitialized {
            uv_walk(uvLoop, { handle, _ in
                if let handle, uv_is_closing(handle) == 0 { uv_close(handle, nil) }
            }, nil)
            _ = uv_run(uvLoop, UV_RUN_NOWAIT)
            result = uv_loop_close(uvLoop)
        }
        report = ShutdownReport(closedHandles: [], loopCloseResult: result)
        // No message here: `tryStart` throws, and every use of the loop is refused with this error.
        finished.open()
    }

    deinit {
        let closed = state.load(ordering: .acquiring) == .closed
        assert(closed, "EventLoop '\(name)' was released without shutdown()")
        localQueue.deallocate()
        draining.deallocate()
        // Only ever lent to libuv between an allocation callback and its read callback.
        readBufferStorage?.deallocate()
        while let block = takeSpareFSRequest() { LibUVMemory.free(block) }
        withInbox { $0.items.deallocate() }
        if closed, report?.loopCloseResult == 0 {
            wakeup.deallocate()
            idle.deallocate()
            timerDriver.deallocate()
            metricsProbe?.deallocate()
            uvLoop.deallocate()
        }
        // Otherwise libuv may still point into this memory: leak it.
    }

    /// The loop whose thread is the calling thread, or nil off loop threads.
    ///
    /// Thread rule: safe from any thread.
    public override class var current: EventLoop? {
        guard let pointer = ThreadLocals.currentLoop.value else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// The buffer every stream on this loop reads into. Loop thread only.
    var readBuffer: UnsafeMutableRawPointer {
        assertInEventLoop()
        if let buffer = readBufferStorage { return buffer }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: ReadBuffer.size, alignment: 16)
        readBufferStorage = buffer
        return buffer
    }

    /// Whether the calling thread is this loop's thread.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public var inEventLoop: Bool {
        // As integers: one compare (this loop's address is never null).
        UInt(bitPattern: ThreadLocals.currentLoop.value) == UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque())
    }

    /// This loop as a `Scheduler`.
    ///
    /// Thread rule: safe from any thread.
    public var scheduler: Scheduler { self }

    /// `"loop 'name'"`.
    ///
    /// Thread rule: safe from any thread.
    public override var schedulerDescription: String { "loop '\(name)'" }

    /// Whether the loop has finished shutting down.
    ///
    /// Thread rule: safe from any thread.
    public var isShutDown: Bool { state.load(ordering: .acquiring) == .closed }

    // MARK: - Scheduler (timers in Loop/Timers/, queued work in EventLoop+Scheduler.swift)

    /// The monotonic clock `uv_hrtime` reads; a simulated loop's virtual time.
    ///
    /// Thread rule: safe from any thread.
    public override var now: SchedulerInstant { SchedulerInstant(nanoseconds: clockNanoseconds) }

    /// What the loop's timers count from: the monotonic clock, or the simulation's virtual time.
    @inline(__always)
    var clockNanoseconds: UInt64 {
        if let virtualClock { return virtualClock.nanoseconds }
        return SchedulerInstant.now.nanoseconds
    }

    /// Runs `work` on the loop thread after what is already queued.
    ///
    /// - Returns: A disposable that cancels the work if it has not started, or
    ///   nil when the loop has shut down (a message says the work was not run).
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        scheduleSoon(work)
    }

    /// Runs `work` once on the loop thread, no earlier than `delay` from now.
    ///
    /// Sub-millisecond delays round up to a millisecond; zero or negative queues it like `schedule(_:)`.
    ///
    /// - Returns: A disposable that cancels the timer, or nil after shutdown.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        scheduleTimer(after: delay, work)
    }

    /// Runs `work` after `delay`, then every `interval`, without drift.
    ///
    /// Tick N is due at start + delay + N·interval; ticks missed while the loop was blocked are
    /// coalesced. Intervals under 1 ms are raised to 1 ms; `leeway` is ignored.
    ///
    /// - Returns: A disposable that stops the timer, or nil after shutdown.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(
        after delay: Duration,
        repeatingEvery interval: Duration,
        leeway: Duration = .zero,
        _ work: @escaping @Sendable () -> Void
    ) -> (any Disposable)? {
        scheduleRepeatingTimer(after: delay, every: interval, work)
    }

    @inline(__always)
    func withInbox<R>(_ body: (inout Inbox) -> R) -> R {
        inboxLock.lock()
        defer { inboxLock.unlock() }
        return body(&inbox)
    }
}

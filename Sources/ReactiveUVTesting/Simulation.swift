import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// Runs production code on simulated event loops: virtual time, one thread, and an order of
/// callbacks drawn from a seed, so a run is exact and replays from its seed.
///
/// `loop` (and each `makeLoop(name:)`) is a real `EventLoop` (the same run queues, timers,
/// operators, executor and shutdown) that this simulation drives instead of libuv. Nothing runs
/// until the test calls `run(for:)` or `runUntilIdle()`: they run every callback that is ready,
/// and when none is, jump the virtual clock to the next timer. Where several callbacks are ready
/// at once (on different loops, or a loop's own queue, its inbox and a due timer), the seeded
/// generator picks which runs first; each source keeps its own order (submission order, timers
/// by deadline). Every callback is appended to `trace`; `traceHash` sums it up.
///
/// The loops share a simulated network: `TCPServer` and `TCP.connect` on them (numeric addresses),
/// and `UnixSocket.listen` and `connect` (paths are names of the simulation, not files),
/// exchange bytes, FIN and RST on virtual time, with the latency, jitter, resets and short reads
/// of `setNetworkFaults(_:)` drawn from the seed, and `partition(_:_:for:)` between two loops.
/// Faults may instead be written as a plan (`init(seed:loopName:faultPlan:)`); `injectedFaults`
/// records what a run armed, and `shrink(seed:faults:print:_:)` cuts a failing list down.
/// What the streams and files read is digested into the trace. Tasks follow too: `loop.task` runs on its
/// loop, `clock` sleeps on virtual time, and a blocking `first()` on this thread runs the
/// simulation. `Files` on its loops work on an in-memory tree (directories, files, links, modes,
/// times on virtual time; `Files.open` and `OpenFile`; `FileWatch.changes`, recursive too, `poll` and `follow`), with
/// `ENOSPC`, `EMFILE`, `EIO` and watch overflows from a plan or `setFileFaults(_:)`.
/// `UDP` sockets exchange datagrams, host names resolve through `addHost(_:addresses:)`, and
/// plans add DNS failures, dropped datagrams and clock jumps (`SimulationFault`).
/// `ChildProcess` runs programs given as closures (`addProgram(_:_:)`), `StandardIO` reads a
/// scripted input and writes into a capture, and `Signal.unixSignals` gets the signals the test
/// sends (`send(signal:at:)`). `ThreadPool.run` runs its work as a callback of the simulation and
/// delivers the result after a virtual duration (`setThreadPool(_:)`). Families with no simulated
/// backend yet refuse its loops with `ENOTSUP`.
///
/// ```swift
/// let simulation = Simulation(seed: 7)
/// let recorder = try simulation.record(Signal<Int>.interval(.seconds(1)).take(3))
/// simulation.runUntilIdle()
/// // recorder.recorded times: 1 s, 2 s, 3 s (virtual), whatever the machine's load.
/// simulation.finish()   // disposes recorders, checks nothing is left open, shuts the loops down
/// ```
///
/// Thread rule: use a simulation and its loops from one thread (the test's); their callbacks run
/// on it, inside `run(for:)`, `runUntilIdle()` and `perform(on:_:)`.
public final class Simulation: SimulationDriver, @unchecked Sendable {
    // Sendable: every stored var is touched only by the driving thread (the thread rule); the
    // clock is atomic, so callbacks of other code may read the time.

    /// The seed the order of ready callbacks is drawn from.
    public let seed: UInt64
    /// The first simulated loop.
    public let loop: EventLoop
    /// Every loop of this simulation, `loop` first.
    @exclusivity(unchecked) public private(set) var loops: [EventLoop]
    /// Every callback run so far, with its virtual time.
    @exclusivity(unchecked) public internal(set) var trace = SimulationTrace()

    let virtualClock: VirtualClock
    /// The network of this simulation's loops (TCP servers and connections), its faults drawn from the seed.
    package let network: SimulatedNetwork
    /// The in-memory file system of this simulation's loops (`Files` on them).
    package let files: SimulatedFileSystem
    /// The programs, standard I/O and OS signals of this simulation's process.
    package let system: SimulatedSystem
    // These and `loops`, `trace`: touched between callbacks, no access spans one: exclusivity unchecked.
    @exclusivity(unchecked) private var generator: SeededRandomNumberGenerator
    /// The look at the loops before the latest callback (`Simulation+Look.swift`).
    private let look = SimulationLook()
    /// The last look found nothing ready and only the clock moved since (`drive`).
    @exclusivity(unchecked) private var onlyClockMoved = false
    private var recorders: [any Disposable] = []
    private var problems: [String] = []
    private var driving = false
    private var report: HarnessReport?
    /// The partitions asked and file faults armed so far (`injectedFaults`).
    var faultsArmed: [SimulationFault] = []
    /// Clock jumps planned and not yet made, by time (virtual nanoseconds): `Simulation+ClockJump.swift`.
    var clockJumps: [(at: UInt64, by: UInt64)] = []
    /// The digest of what simulated streams read during the callback running now, if any read.
    @exclusivity(unchecked) private var callbackPayload: UInt64?
    /// What simulated streams read, in order, while `recordsTimeline` is on (`Simulation+Timeline.swift`).
    var timelineDeliveries: [SimulationDelivery] = []

    /// A simulation at virtual time zero with one loop named `loopName`.
    ///
    /// - Parameters:
    ///   - seed: Picks the order of callbacks ready at once; equal seeds, equal runs.
    ///   - loopName: The name of the first loop (``loop``).
    ///
    /// Thread rule: the thread that will drive it.
    public init(seed: UInt64, loopName: String = "sim") {
        self.seed = seed
        virtualClock = VirtualClock()
        generator = SeededRandomNumberGenerator(seed: seed)
        // Faults draw from a generator of their own, so they do not shift the order's draws.
        let faultNumbers = FaultNumbers(seed: seed)
        network = SimulatedNetwork(random: { faultNumbers.next() })
        files = SimulatedFileSystem(clock: virtualClock)
        let fileNumbers = FaultNumbers(seed: seed ^ 0xD1B5_4A32_D192_ED03)
        files.random = { fileNumbers.next() }
        let processNumbers = FaultNumbers(seed: seed ^ 0x5851_F42D_4C95_7F2D)
        system = SimulatedSystem(clock: virtualClock, network: network, random: { processNumbers.next() })
        loop = EventLoop.simulated(name: loopName, clock: virtualClock, network: network, files: files, system: system)
        loops = [loop]
        SimulationDrivers.register(self)
        network.readObserver = { [weak self] bytes, status in
            guard let self else { return }
            callbackPayload = SimulationTrace.digest(bytes, status: status, into: callbackPayload ?? SimulationTrace.payloadSeed)
        }
        files.readObserver = network.readObserver
        let poolNumbers = FaultNumbers(seed: seed ^ 0x2545_F491_4F6C_DD1D)
        system.threadPool.random = { poolNumbers.next() }
    }

    deinit {
        // A safety net for a test that forgot finish(): a loop must be shut down before release.
        if report == nil { _ = finish() }
        SimulationDrivers.unregister(self)
    }

    /// Adds a simulated loop on the same virtual clock, named `name`.
    ///
    /// Thread rule: the driving thread.
    public func makeLoop(name: String) -> EventLoop {
        let made = EventLoop.simulated(name: name, clock: virtualClock, network: network, files: files, system: system)
        loops.append(made)
        return made
    }

    /// Adds `loopCount` simulated loops (at least 1) named `name-0`, `name-1`... and returns them
    /// as an `EventLoopGroup`, for code that takes a group (`TCPServer.listen(on: group)`,
    /// `UnixSocket.serve(path:on: group)`, `next()`).
    /// `finish()` shuts them down with the others.
    ///
    /// Thread rule: the driving thread.
    public func makeGroup(loopCount: Int, name: String = "group") -> EventLoopGroup {
        EventLoopGroup(loops: (0..<max(1, loopCount)).map { makeLoop(name: "\(name)-\($0)") })
    }

    /// The virtual time (zero when the simulation began); the loops' `now`.
    ///
    /// Thread rule: safe from any thread.
    public var now: SchedulerInstant { SchedulerInstant(nanoseconds: virtualClock.nanoseconds) }

    /// The virtual time as a Swift `Clock`: `Task.sleep(for:clock:)` and code taking a clock wait on it.
    ///
    /// Thread rule: safe from any thread.
    public var clock: SimulationClock { SimulationClock(loop: loop, virtualClock: virtualClock) }

    /// The trace's hash: equal for two runs of one program from one seed.
    ///
    /// Thread rule: the driving thread.
    public var traceHash: UInt64 { trace.hash }

    /// Runs `body` now as a callback of `loop` (default: `self.loop`), traced like the others, so
    /// what it subscribes lives on that loop and its timers on virtual time.
    ///
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw; `SimulationMisuse` (nothing run) for a loop not of this
    ///   simulation, from inside a simulated callback, or after `finish()`.
    ///
    /// Thread rule: the driving thread, outside the simulation's callbacks.
    @discardableResult
    public func perform<R>(on loop: EventLoop? = nil, _ body: () throws -> R) throws -> R {
        let target = loop ?? self.loop
        if driving { throw SimulationMisuse("perform(on:) was called from inside a simulated callback") }
        if report != nil { throw SimulationMisuse("perform(on:) was called after finish()") }
        guard let index = loops.firstIndex(where: { $0 === target }) else {
            throw SimulationMisuse("perform(on:) was given loop '\(target.name)', which is not one of this simulation's")
        }
        trace.append(SimulationTraceEntry(time: now, loopName: target.name, loopIndex: index, kind: .perform))
        return try target.performAsSimulatedCallback { () throws -> R in try body() }
    }

    /// Subscribes to `signal` on `loop` (default: `self.loop`) and records its events with their
    /// virtual times; `finish()` disposes it.
    ///
    /// - Throws: `SimulationMisuse` as `perform(on:_:)` does.
    ///
    /// Thread rule: the driving thread, outside the simulation's callbacks.
    public func record<Value>(_ signal: Signal<Value>, on loop: EventLoop? = nil, label: String? = nil) throws -> EventRecorder<Value> {
        let recorder = try perform(on: loop) { EventRecorder(signal, label: label) }
        recorders.append(ActionDisposable { recorder.dispose() })
        return recorder
    }

    /// Runs callbacks, jumping the clock to the next timer whenever none is ready, until nothing is
    /// left to run, or `limit` callbacks ran (then a problem is noted for `finish()`). Called from
    /// inside a callback it runs nothing and notes a problem.
    ///
    /// - Returns: How many callbacks ran.
    ///
    /// Thread rule: the driving thread, outside the simulation's callbacks.
    @discardableResult
    public func runUntilIdle(limit: Int = 1_000_000) -> Int {
        drive(until: nil, limit: limit, what: "runUntilIdle()", stop: { false })
    }

    /// Runs callbacks for `duration` of virtual time (negative counts as zero), jumping from timer
    /// to timer; the clock ends at exactly now + `duration`, unless `limit` callbacks ran first
    /// (then a problem is noted for `finish()`). Called from inside a callback it runs nothing and
    /// notes a problem.
    ///
    /// - Returns: How many callbacks ran.
    ///
    /// Thread rule: the driving thread, outside the simulation's callbacks.
    @discardableResult
    public func run(for duration: Duration, limit: Int = 1_000_000) -> Int {
        let (target, overflow) = virtualClock.nanoseconds.addingReportingOverflow(duration.clampedNanoseconds)
        return drive(until: overflow ? .max : target, limit: limit, what: "run(for: \(duration))", stop: { false })
    }

    /// Runs callbacks until `stop()` (checked after each), nothing is left before `target`, or
    /// `limit` callbacks ran; the clock ends at `target` unless `stop()` or the limit ended it first.
    private func drive(until target: UInt64?, limit: Int, what: String, stop: () -> Bool) -> Int {
        guard !driving else {
            problems.append("\(what) was called from inside a simulated callback, and ran nothing")
            return 0
        }
        driving = true
        defer { driving = false }
        var ran = 0
        while true {
            if runOneReady() {
                ran += 1
                if stop() { return ran }
                if ran >= limit { break }
                continue
            }
            // The look that found nothing ready saw every deadline as it stands.
            let next = look.earliestDeadline
            if jumpClock(before: min(next ?? target ?? now.nanoseconds, target ?? .max)) { continue }
            guard let next, next <= target ?? .max else {
                if let target { virtualClock.advance(to: target) }
                return ran
            }
            virtualClock.advance(to: next)
            onlyClockMoved = true
        }
        let left = loops.contains { !$0.simulatedReadiness().isEmpty } || nextDeadline().map { $0 <= target ?? .max } == true
        if left {
            problems.append("\(what) stopped after \(limit) callbacks with work still due at \(now)"
                            + (target == nil ? " (repeating work never idles: use run(for:))" : ""))
        } else if let target {
            virtualClock.advance(to: target)
        }
        return ran
    }

    /// Runs one ready callback, drawn by the generator when several are ready; false when none is.
    private func runOneReady() -> Bool {
        if onlyClockMoved {
            onlyClockMoved = false
            look.takeAfterClockMoved(to: virtualClock.nanoseconds)
        } else {
            look.take(loops, now: virtualClock.nanoseconds)
        }
        guard look.count > 0 else { return false }
        let pick = look.count == 1 ? 0 : Int(generator.next() % UInt64(look.count))
        let chosen = look[pick]
        look.noteRan(chosen.loop)
        let time = virtualClock.nanoseconds
        // Borrowed, not retained: `loops` keeps every loop for the simulation's life.
        let loop = look.loop(at: chosen.loop)
        let kind: SimulationCallbackKind
        callbackPayload = nil
        defer { callbackPayload = nil }
        switch loop._withUnsafeGuaranteedRef({ $0.runSimulatedCallback(chosen.ready) }) {
        case .queuedWork: kind = .queuedWork
        case .inboxWork: kind = .inboxWork
        case .taskJob: kind = .taskJob
        case .actorJob: kind = .actorJob
        case .timer: kind = .timer
        case .shutdown: kind = .shutdown
        case .poolWork: kind = .poolWork
        case .none: return true
        }
        trace.append(time: time, loopIndex: chosen.loop, kind: kind, payload: callbackPayload) { loop.takeUnretainedValue().name }
        return true
    }

    private func nextDeadline() -> UInt64? {
        var earliest: UInt64?
        for loop in loops {
            if let deadline = loop.simulatedNextDeadline(), earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
        }
        return earliest
    }

    /// A blocking wait (`first(timeout:)`...) made on the driving thread: see `SimulationDriver`.
    package func driveBlocking(operation: String, timeout: Duration?, start: () -> Void,
                               isDone: () -> Bool, abandon: () -> Void) throws {
        try perform(start)
        if isDone() { return }
        let target = timeout.map { timeout -> UInt64 in
            let (sum, overflow) = virtualClock.nanoseconds.addingReportingOverflow(timeout.clampedNanoseconds)
            return overflow ? .max : sum
        }
        _ = drive(until: target, limit: 1_000_000, what: operation, stop: isDone)
        if isDone() { return }
        try perform(abandon)
        if let timeout, let target, virtualClock.nanoseconds >= target {
            throw TimeoutError(operation: operation, after: timeout)
        }
        throw SimulationMisuse("\(operation) would wait forever: nothing is left to run at \(now) and the signal has not ended")
    }

    /// Disposes every recorder, runs what that queued (time passes only while network packets
    /// are in flight, so the last FIN and RST land), lists what is still open (pending timers
    /// included: there must be none), shuts every loop down and checks `uv_loop_close` returned
    /// 0. Calling it again returns the first report.
    ///
    /// - Returns: The report, with the problems `run` calls noted.
    ///
    /// Thread rule: the driving thread, outside the simulation's callbacks.
    @discardableResult
    public func finish() -> HarnessReport {
        if let report { return report }
        for recorder in recorders { recorder.dispose() }
        recorders = []
        driving = true
        var rounds = 0
        while rounds < 100_000 {
            if runOneReady() {
                rounds += 1
                continue
            }
            guard network.packetsInFlight > 0, let next = nextDeadline() else { break }
            virtualClock.advance(to: next)
        }
        driving = false
        let leaked = loops.flatMap { $0.simulatedOpenHandles() }
        var closeResult: Int32 = 0
        for loop in loops {
            do {
                let result = try loop.tryShutdown().loopCloseResult
                if closeResult == 0 { closeResult = result }
            } catch {
                problems.append("shutdown of loop '\(loop.name)' failed: \(error)")
                closeResult = -1
            }
        }
        system.tearDown()
        let made = HarnessReport(leakedHandles: leaked, loopCloseResult: closeResult, otherProblems: problems + system.problems)
        report = made
        SimulationDrivers.unregister(self)
        return made
    }
}

/// The seed's numbers for the network's faults, apart from those that order callbacks.
private final class FaultNumbers: @unchecked Sendable {
    // Sendable: drawn only on the simulation's driving thread.
    private var generator: SeededRandomNumberGenerator

    init(seed: UInt64) { generator = SeededRandomNumberGenerator(seed: seed ^ 0x9E37_79B9_7F4A_7C15) }

    func next() -> UInt64 { generator.next() }
}

/// A `Simulation` used against its thread rule or after `finish()`; nothing was run.
///
/// Thread rule: a value; safe from any thread.
public struct SimulationMisuse: Error, CustomStringConvertible {
    /// What was wrong.
    public let description: String

    init(_ description: String) { self.description = "Simulation: " + description }
}

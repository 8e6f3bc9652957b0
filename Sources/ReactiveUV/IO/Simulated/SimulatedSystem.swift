internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The operating system around a simulation's process, shared by its loops: the programs a
/// `ChildProcess.spawn` runs (closures, by executable), the crashes drawn or planned for them,
/// scripted standard input, captured standard output and error, and the OS signals the test sends.
///
/// Nothing here touches the real system: no pid is real, no descriptor is read or written, no
/// signal is raised. What happens is traced as the callbacks of the loops that see it.
///
/// Thread rule: the simulation's driving thread (its loops' callbacks, and the test between them).
package final class SimulatedSystem: @unchecked Sendable {
    // Sendable: touched only on the driving thread, whose callbacks are all its loops'.

    /// A program: run once per spawn of its executable, as a callback of the spawning loop, with
    /// the child it is; it reads, writes, exits or dies through the child.
    package typealias Program = (SimulatedChildProcess) -> Void

    /// What the spawned children suffer, from the seed.
    ///
    /// Thread rule: a value; safe from any thread.
    package struct CrashFaults: Sendable {
        /// Children in a thousand killed at a drawn time.
        package var perMille = 0
        /// The window after the spawn in which a drawn crash falls.
        package var within: Duration = .seconds(1)
        /// The signals a drawn crash kills with (one drawn per crash).
        package var signals: [Int32] = [SIGSEGV, SIGKILL]

        package init() {}
    }

    /// A write the process made to its standard output or error, with its virtual time.
    ///
    /// Thread rule: a value; safe from any thread.
    package struct CapturedWrite: Sendable {
        package let at: UInt64
        package let loopName: String
        package let bytes: [UInt8]
    }

    let clock: VirtualClock
    let network: SimulatedNetwork
    private let random: () -> UInt64

    // MARK: programs and children

    var programs: [String: Program] = [:]
    /// Executables in the order they were first added: a bare name finds the first path ending in it.
    var programOrder: [String] = []
    /// Children spawned so far; the next one is numbered this plus 1.
    package private(set) var childrenSpawned = 0
    private var nextPid: Int32 = 1_000

    package var crashFaults = CrashFaults()
    /// The thread pool `ThreadPool.run` queues its jobs on.
    package let threadPool = SimulatedThreadPool()
    /// False under a written plan: crashes are still drawn (so later draws keep the seed's
    /// numbers) but arm nothing.
    package var drawsCrashes = true
    /// Crashes written in a plan: child number to (virtual nanoseconds, signal); they win over a draw.
    package var plannedCrashes: [Int: (at: UInt64, signal: Int32)] = [:]
    /// Every crash armed (drawn or planned): child number, when, and the signal.
    package private(set) var crashesArmed: [(child: Int, at: UInt64, signal: Int32)] = []

    // MARK: standard input, output, error

    /// Scripted standard input not read yet, by arrival time (virtual nanoseconds).
    var pendingInput: [(at: UInt64, bytes: [UInt8])] = []
    /// When standard input ends, once scripted.
    package internal(set) var inputEndsAt: UInt64?
    /// The one reader of standard input now.
    var inputReader: SimulatedStandardInput?
    /// What standard output (1) and standard error (2) were given, in order.
    package internal(set) var captured: [Int32: [CapturedWrite]] = [:]
    /// When the reader of standard output (1) or error (2) goes away (virtual nanoseconds): a
    /// write from then on fails with `EPIPE`.
    package var outputClosesAt: [Int32: UInt64] = [:]
    /// The writers of descriptors 1 and 2 on this simulation's loops (`StandardIO.output`);
    /// dropped by `tearDown()`, as a writer holds its loop, which holds this.
    var writers: [Int32: StandardWriter] = [:]

    /// The terminal standard input, output and error are on; nil (the default) as under pipes.
    package var terminal: SimulatedTerminal?

    // MARK: signals

    /// `Signal.unixSignals` subscriptions open on the loops, oldest first.
    var signalWatches: [SimulatedSignalWatch] = []
    /// What went wrong that nobody else could be told (a signal no watch took).
    package internal(set) var problems: [String] = []

    /// A system on `clock`, tracing through `network`'s read observer, drawing crashes from `random`.
    package init(clock: VirtualClock, network: SimulatedNetwork, random: @escaping () -> UInt64) {
        self.clock = clock
        self.network = network
        self.random = random
    }

    /// The virtual time now, in nanoseconds.
    var now: UInt64 { clock.nanoseconds }

    /// Digests `bytes` (with `status`) into the trace entry of the callback running now.
    func noteInTrace(_ bytes: [UInt8], status: Int32) {
        bytes.withUnsafeBytes { network.noteRead($0, status: status) }
    }

    func draw(below bound: UInt64) -> UInt64 {
        bound == 0 ? 0 : random() % bound
    }

    /// Drops what would keep the loops alive once the simulation finished (a writer holds its
    /// loop; a program may hold the simulation): called after the loops shut down.
    package func tearDown() {
        writers = [:]
        programs = [:]
        programOrder = []
        inputReader = nil
        signalWatches = []
    }

    // MARK: - programs

    /// Registers `program` for `executable` (a path or a bare name), replacing one registered before.
    package func addProgram(_ executable: String, _ program: @escaping Program) {
        if programs.updateValue(program, forKey: executable) == nil { programOrder.append(executable) }
    }

    /// Forgets the program of `executable`; later spawns of it fail with `ENOENT`.
    package func removeProgram(_ executable: String) {
        programs[executable] = nil
        programOrder.removeAll { $0 == executable }
    }

    /// The program `executable` names: its exact entry, else (a bare name, as `PATH` is searched)
    /// the first registered path whose last component it is.
    func program(for executable: String) -> Program? {
        if let exact = programs[executable] { return exact }
        guard !executable.isEmpty, !executable.contains("/") else { return nil }
        let match = programOrder.first { $0.hasSuffix("/" + executable) }
        return match.flatMap { programs[$0] }
    }

    /// Numbers the next child and gives it a pid.
    func nextChild() -> (number: Int, pid: Int32) {
        childrenSpawned += 1
        nextPid += 1
        return (childrenSpawned, nextPid)
    }

    /// The crash the child numbered `number`, spawned now, suffers: drawn, or planned (which wins).
    func crash(forChild number: Int) -> (at: UInt64, signal: Int32)? {
        var crash: (at: UInt64, signal: Int32)?
        if crashFaults.perMille > 0, draw(below: 1_000) < UInt64(crashFaults.perMille) {
            let at = now &+ draw(below: UInt64(clamping: crashFaults.within.clampedNanoseconds &+ 1))
            let signals = crashFaults.signals.isEmpty ? [SIGKILL] : crashFaults.signals
            crash = (at, signals[Int(draw(below: UInt64(signals.count)))])
        }
        if !drawsCrashes { crash = nil }
        if let planned = plannedCrashes[number] { crash = planned }
        if let crash { crashesArmed.append((number, crash.at, crash.signal)) }
        return crash
    }
}

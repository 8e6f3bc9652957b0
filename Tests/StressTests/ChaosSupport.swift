import Foundation
import ReactiveUV
import Synchronization

// Support for the seeded, scaled stress runs: the size factor every stress test
// honours, a replayable random source, a watchdog that turns a hang into a
// failure with every thread's stack, and a ledger of broken invariants.

/// The size factor of every stress test, from `STRESS_SCALE` (default 1: full size).
///
/// CI runs the StressTests target under the thread sanitizer with a fraction
/// (see scripts/sanitize-stress); a test's own variables (`SHUTDOWN_ROUNDS`...)
/// still override its counts.
let stressScale: Double = {
    guard let text = ProcessInfo.processInfo.environment["STRESS_SCALE"], let value = Double(text), value > 0 else {
        return 1
    }
    return value
}()

/// `full` times `stressScale`, rounded, and never below `minimum`.
func scaled(_ full: Int, minimum: Int = 1) -> Int {
    max(minimum, Int((Double(full) * stressScale).rounded()))
}

/// SplitMix64: a small, fast generator whose whole sequence follows from its seed, so a run can be replayed.
struct ChaosRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }

    /// A number in `range`.
    mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &self) }

    /// True with probability `percent`/100.
    mutating func percent(_ percent: Int) -> Bool { int(0..<100) < percent }

    /// A seed for another generator (one per thread, so each thread's choices replay).
    mutating func fork() -> ChaosRandom { ChaosRandom(seed: next()) }
}

/// The seed from `CHAOS_SEED` (decimal, or hex with 0x), else a fresh random one.
func chaosSeed() -> UInt64 {
    if let text = ProcessInfo.processInfo.environment["CHAOS_SEED"] {
        let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
        if let parsed { return parsed }
        FileHandle.standardError.write(Data("CHAOS_SEED=\(text) is not a number; using a random seed\n".utf8))
    }
    var system = SystemRandomNumberGenerator()
    return system.next()
}

/// Which thread this is, for messages: the loop's name, or the pthread id of a thread that is no loop's.
func currentThreadDescription() -> String {
    if let loop = EventLoop.current { return "loop '\(loop.name)'" }
    return "non-loop thread \(Thread.current.name.map { "'\($0)' " } ?? "")(pthread \(pthread_self()))"
}

/// Turns a hang into a failure.
///
/// Unless `disarm()` is called within `deadline`, it writes `describe()` (the
/// workload's own view: loops, threads, outstanding operations) and every
/// thread's stack (through gdb, when the machine has it) to standard error,
/// then aborts the process: a hung test would otherwise never report at all.
/// The deadline is generous; it bounds a hang, it does not time the work.
final class Watchdog: @unchecked Sendable {
    // `disarmed` is atomic and `wakeUp` a semaphore; everything else is immutable.
    private let disarmed = Atomic<Bool>(false)
    private let wakeUp = DispatchSemaphore(value: 0)

    init(_ what: String, deadline: Duration, describe: @escaping @Sendable () -> String) {
        let thread = Thread { [self] in
            let nanoseconds = Int(seconds(deadline) * 1e9)
            if wakeUp.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success { return }
            if disarmed.load(ordering: .acquiring) { return }
            let header = "\n===== WATCHDOG: \(what) did not finish within \(formatted(deadline)) =====\n"
            FileHandle.standardError.write(Data(header.utf8))
            FileHandle.standardError.write(Data((describe() + "\n").utf8))
            FileHandle.standardError.write(Data("===== every thread's stack =====\n\(allThreadBacktraces())\n".utf8))
            FileHandle.standardError.write(Data("===== WATCHDOG: aborting: \(what) hung =====\n".utf8))
            abort()
        }
        thread.name = "watchdog"
        thread.start()
    }

    /// The work finished: the watchdog stands down.
    func disarm() {
        disarmed.store(true, ordering: .releasing)
        wakeUp.signal()
    }
}

/// Every thread's stack, from `gdb -p <this process> -batch -ex 'thread apply all bt'`.
func allThreadBacktraces() -> String {
    let candidates = ["/usr/bin/gdb", "/usr/local/bin/gdb", "/bin/gdb"]
    guard let gdb = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        return "(gdb is not installed: no stacks; install it (apt-get install gdb) to get them)"
    }
    // To a file, not a pipe: gdb stops this process, so nothing here could drain a pipe,
    // and gdb would block on a full one for ever.
    let path = NSTemporaryDirectory() + "reactiveuv-stacks-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).txt"
    guard FileManager.default.createFile(atPath: path, contents: nil), let output = FileHandle(forWritingAtPath: path) else {
        return "(could not create \(path) for gdb's output)"
    }
    defer { try? FileManager.default.removeItem(atPath: path) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: gdb)
    process.arguments = ["-p", String(getpid()), "-batch", "-nx", "-iex", "set complaints 0",
                         "-ex", "set pagination off", "-ex", "thread apply all bt 40"]
    process.standardOutput = output
    process.standardError = output
    do {
        try process.run()
    } catch {
        return "(could not run \(gdb): \(error))"
    }
    process.waitUntilExit()
    try? output.close()
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(gdb wrote nothing readable)" }
    return text
}

/// Invariant violations and operation counts of one chaos run, shared by every thread.
final class ChaosLedger: @unchecked Sendable {
    // `count` and `first` are protected by `lock`; the counters are atomic.
    private let lock = NSLock()
    private var count = 0
    private var first: [String] = []

    let subscribes = Atomic<Int>(0)
    let refusedSubmissions = Atomic<Int>(0)
    let foreignDisposes = Atomic<Int>(0)
    let loopDisposes = Atomic<Int>(0)
    let selfDisposes = Atomic<Int>(0)
    let callbacks = Atomic<Int>(0)
    let attached = Atomic<Int>(0)
    let tornDown = Atomic<Int>(0)
    let actorCalls = Atomic<Int>(0)
    let outstandingTasks = Atomic<Int>(0)
    let liveProbes = Atomic<Int>(0)
    /// Every probe made this round, weakly, so a failure can name the ones still alive (under `lock`).
    private var probes: [WeakProbe] = []
    let loopShutdowns = Atomic<Int>(0)
    let echoConnections = LiveCounter()
    let asyncOperations = LiveCounter()

    /// Notes a probe, so `liveProbeLabels` can name it if it outlives the round.
    func track(_ probe: Probe) {
        lock.withLock { probes.append(WeakProbe(probe)) }
    }

    /// The labels of the probes still alive (what the subscription was: its source, hops and home).
    var liveProbeLabels: [String] {
        lock.withLock { probes.compactMap { $0.probe?.label } }
    }

    /// Records a broken invariant (the first 20 are kept word for word).
    func violation(_ text: String) {
        lock.withLock {
            count += 1
            if first.count < 20 { first.append(text) }
        }
    }

    /// How many invariants broke, and the first ones.
    var violations: (count: Int, first: [String]) { lock.withLock { (count, first) } }

    /// The counters in one line.
    var summary: String {
        func value(_ counter: borrowing Atomic<Int>) -> Int { counter.load(ordering: .relaxed) }
        return "\(value(subscribes)) subscribes (\(value(attached)) attached, \(value(tornDown)) torn down), "
            + "\(value(foreignDisposes)) disposes from non-loop threads, "
            + "\(value(loopDisposes)) from loops, \(value(selfDisposes)) from their own callbacks, "
            + "\(value(callbacks)) callbacks, \(value(actorCalls)) actor calls (\(value(outstandingTasks)) tasks outstanding), "
            + "\(value(refusedSubmissions)) submissions refused by closed loops, \(value(loopShutdowns)) loop shutdowns, "
            + "\(value(liveProbes)) subscriptions' probes alive"
    }
}

/// A weak reference to a probe (the ledger must not keep one alive).
final class WeakProbe: @unchecked Sendable {
    // Written once in init; a weak reference is safe to read from any thread.
    weak var probe: Probe?
    init(_ probe: Probe) { self.probe = probe }
}

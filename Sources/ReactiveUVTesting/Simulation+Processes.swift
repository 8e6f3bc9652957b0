import ReactiveUV

extension Simulation {
    /// Makes `executable` a program of the simulation: each `ChildProcess.spawn` or `run` of it on
    /// the simulation's loops runs `program` with the child, as the loop's next callback after the
    /// spawn, instead of starting a process. The production code is unchanged: its `RunningChild`,
    /// pipes, exit and `kill(signal:)` work as with a real child.
    ///
    /// `executable` is matched as given; a bare name (no slash) given to `spawn` also finds the
    /// first program added under a path ending in `/name`, as a `PATH` search would. A spawn that
    /// finds no program fails with `ENOENT`, as `execvp` does. Adding a program again replaces it.
    ///
    /// ```swift
    /// try simulation.addProgram("/usr/bin/wc") { child in
    ///     child.lifetime.add(child.standardInput.aggregate(0) { $0 + $1.count }.subscribeNext { count in
    ///         child.write("\(count)\n")
    ///         child.exit(status: 0)
    ///     })
    /// }
    /// ```
    ///
    /// - Throws: `SimulationMisuse` for an empty executable or one with a NUL byte.
    ///
    /// Thread rule: the driving thread; `program` runs on the spawning loop, inside the simulation's callbacks.
    public func addProgram(_ executable: String, _ program: @escaping (SimulatedChild) -> Void) throws(SimulationMisuse) {
        if executable.isEmpty || executable.utf8.contains(0) {
            throw SimulationMisuse("addProgram: the executable must be a non-empty name without a NUL byte, got \"\(executable)\"")
        }
        system.addProgram(executable) { process in program(SimulatedChild(process)) }
    }

    /// `addProgram(_:_:)` for a program written as async code: `program` runs in a task on the
    /// child's loop (`loop.task`: each of its jobs is a callback the simulation orders and
    /// traces); the child exits with the status it returns. When it throws, the child writes the
    /// error to standard error and exits with 1. When the child ends first (a signal, a crash),
    /// the task is cancelled.
    ///
    /// ```swift
    /// try simulation.addProgram("/usr/bin/tr", running: { child in
    ///     for try await line in child.standardInput.lines().values {
    ///         child.write(String(decoding: line, as: UTF8.self).uppercased() + "\n")
    ///     }
    ///     return 0
    /// })
    /// ```
    ///
    /// - Throws: `SimulationMisuse` as `addProgram(_:_:)` does.
    ///
    /// Thread rule: the driving thread; `program` runs on the spawning loop, inside the simulation's callbacks.
    public func addProgram(_ executable: String,
                           running program: @escaping @Sendable (SimulatedChild) async throws -> Int64) throws(SimulationMisuse) {
        try addProgram(executable) { child in
            let task = child.loop.task { _ in
                do {
                    child.exit(status: try await program(child))
                } catch {
                    child.writeError("\(error)\n")
                    child.exit(status: 1)
                }
            }
            child.lifetime.add(ActionDisposable { task.cancel() })
        }
    }

    /// Forgets the program of `executable` (as given to `addProgram`); later spawns of it fail with `ENOENT`.
    ///
    /// Thread rule: the driving thread.
    public func removeProgram(_ executable: String) {
        system.removeProgram(executable)
    }
}

/// A child process a simulation runs: what its program (given to `Simulation.addProgram`) reads,
/// writes and does. Every member is used on the child's loop, inside the program's callbacks.
///
/// - `standardInput` is what the parent writes to the child's standard input (a `.pipe`), as
///   chunks; it completes when the parent closes it (EOF). `.ignore` gives EOF at once; `.inherit`
///   reads the simulation's scripted standard input.
/// - `write` and `writeError` go to the parent's `standardOutput` and `standardError` pipes (or
///   nowhere for `.ignore`, or into the simulation's captured output for `.inherit`), in order.
/// - `exit(status:)` and `die(signal:)` end it: its input closes, what it wrote is still read
///   (before EOF, and before the parent's `exit` reports the end, two loop turns later). A child that never ends
///   keeps running (and the leak check reports its handle) until the parent disposes it. What the
///   program subscribes or schedules belongs in `lifetime`, which ends with the child.
/// - A signal the parent sends (`kill(signal:)`, disposal's SIGTERM then SIGKILL) takes its
///   default action, which kills the child (except SIGCHLD, SIGURG, SIGWINCH, SIGCONT and the
///   stops, which it ignores), unless the program subscribed to `signals(_:)`. Writing to a pipe
///   whose reader closed kills it with SIGPIPE.
///
/// Thread rule: the child's loop thread (the program's callbacks); `description` and the
/// immutable properties from any thread.
public final class SimulatedChild: @unchecked Sendable, CustomStringConvertible {
    // Sendable: immutable; the process it wraps is touched on its loop thread only.
    private let process: SimulatedChildProcess

    init(_ process: SimulatedChildProcess) {
        self.process = process
    }

    /// Its number among the simulation's children, from 1 in spawn order (`.childCrash` names it).
    ///
    /// Thread rule: safe from any thread.
    public var number: Int { process.number }

    /// Its process id (a simulated one: no process of the system has it).
    ///
    /// Thread rule: safe from any thread.
    public var pid: Int32 { process.pid }

    /// The executable as `spawn` was given it.
    ///
    /// Thread rule: safe from any thread.
    public var executable: String { process.executable }

    /// The arguments `spawn` was given (without the program name).
    ///
    /// Thread rule: safe from any thread.
    public var arguments: [String] { process.arguments }

    /// The environment `spawn` was given; nil when it inherits this process's.
    ///
    /// Thread rule: safe from any thread.
    public var environment: [String: String]? { process.environment }

    /// The working directory `spawn` was given; nil for the current one.
    ///
    /// Thread rule: safe from any thread.
    public var workingDirectory: String? { process.workingDirectory }

    /// The loop the program's callbacks run on (the spawning loop).
    ///
    /// Thread rule: safe from any thread.
    public var loop: EventLoop { process.loop }

    /// How it ended, or nil while it runs.
    ///
    /// Thread rule: the child's loop thread.
    public var exitStatus: ProcessExit? { process.exitStatus }

    /// What the program keeps while the child lives: add its timers and subscriptions here, and
    /// they are disposed when the child ends (exits, dies, is killed), as a process's timers and
    /// reads die with it. One added after the end is disposed at once.
    ///
    /// Thread rule: safe from any thread.
    public var lifetime: CompoundDisposable { process.lifetime }

    /// Standard input as chunks, completing at EOF (one reader at a time: `EBUSY`).
    ///
    /// Thread rule: subscribe on the child's loop thread.
    public var standardInput: Signal<[UInt8]> { process.standardInput }

    /// Writes `bytes` to standard output; nothing once the child ended.
    ///
    /// Thread rule: the child's loop thread.
    public func write(_ bytes: [UInt8]) { process.write(bytes, to: 1) }

    /// Writes `text` as UTF-8 to standard output; nothing once the child ended.
    ///
    /// Thread rule: the child's loop thread.
    public func write(_ text: String) { process.write(Array(text.utf8), to: 1) }

    /// Writes `bytes` to standard error; nothing once the child ended.
    ///
    /// Thread rule: the child's loop thread.
    public func writeError(_ bytes: [UInt8]) { process.write(bytes, to: 2) }

    /// Writes `text` as UTF-8 to standard error; nothing once the child ended.
    ///
    /// Thread rule: the child's loop thread.
    public func writeError(_ text: String) { process.write(Array(text.utf8), to: 2) }

    /// The signals among `numbers` sent to the child while subscribed, instead of their default
    /// action (SIGKILL cannot be caught). Fails with `EINVAL` for a number outside 1...64, SIGKILL
    /// or SIGSTOP; completes at once once the child ended; its subscription ends silently when the
    /// child does.
    ///
    /// Thread rule: subscribe on the child's loop thread.
    public func signals(_ numbers: [Int32]) -> Signal<Int32> { process.signals(numbers) }

    /// Exits with `status` (0 for success); nothing when it ended already.
    ///
    /// Thread rule: the child's loop thread.
    public func exit(status: Int64 = 0) { process.exit(status: status) }

    /// Dies by `signal` now, as an uncaught signal kills (11, SIGSEGV, for a crash); nothing when
    /// it ended already.
    ///
    /// Thread rule: the child's loop thread.
    public func die(signal: Int32) { process.die(signal: signal) }

    /// `"wc (pid 1001)"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { process.description }
}

internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a child process ended.
///
/// Thread rule: a value type; safe from any thread.
public struct ProcessExit: Sendable, Hashable, CustomStringConvertible {
    /// The exit status (0 for success); meaningless when `signal` is not 0.
    public let status: Int64
    /// The signal that killed the process, or 0.
    public let signal: Int32

    /// Creates an exit description.
    ///
    /// - Parameters:
    ///   - status: The exit status.
    ///   - signal: The terminating signal, or 0.
    /// - Returns: The description.
    ///
    /// Thread rule: safe from any thread.
    public init(status: Int64, signal: Int32) {
        self.status = status
        self.signal = signal
    }

    /// Whether the process exited with status 0.
    ///
    /// Thread rule: safe from any thread.
    public var succeeded: Bool { status == 0 && signal == 0 }

    /// `"exit status 0"` or `"killed by signal 15"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { signal != 0 ? "killed by signal \(signal)" : "exit status \(status)" }
}

/// What a child process signal sends.
///
/// Order: `.started` first; then output chunks and, once, `.exited`, which is
/// sent as soon as the child exits. Output the child wrote before exiting may
/// still be in its pipes and arrives after `.exited`, as does output of
/// processes it started that keep its standard output or error open (a
/// daemonising child leaves such a grandchild). The signal completes once both
/// pipes reached EOF: right after the exit for most programs, later (or never,
/// for a daemon that keeps them) when another process holds them. Dispose after
/// `.exited` when that output does not matter.
///
/// `RunningChild.output` (a spawned child's two output pipes merged) sends
/// only the `.standardOutput` and `.standardError` cases; `ChildProcess.run`
/// is `.started`, that merged output, and `.exited`.
///
/// Thread rule: a value type; safe from any thread.
public enum ProcessOutput: Sendable, Hashable {
    /// The process started with this id. Sent once, first.
    case started(pid: Int32)
    /// Bytes the process wrote to its standard output.
    case standardOutput([UInt8])
    /// Bytes the process wrote to its standard error.
    case standardError([UInt8])
    /// The process exited. Sent once, when it exits: output may follow it (see the type's order).
    case exited(ProcessExit)
}


/// What a child's standard input, output or error is connected to.
///
/// Thread rule: a value type; safe from any thread.
public enum ProcessStdio: Sendable, Hashable {
    /// A pipe to this process: the child's `ChildPipe` (`RunningChild.standardInput` to write to,
    /// `standardOutput`/`standardError` to read from).
    case pipe
    /// This process's own descriptor (0, 1 or 2): the child reads our input or writes where we write.
    case inherit
    /// Nothing: the child's descriptor is `/dev/null`.
    case ignore
    /// An open descriptor of this process, shared with the child (a file, a socket, a pipe's end).
    /// It must be open when `spawn` runs (else `EBADF`); the caller keeps and closes it.
    case descriptor(Int32)
}

/// Child processes on libuv (`uv_spawn`).
///
/// `run` starts a program and streams what it writes, for the common case;
/// `spawn` hands over a `RunningChild` to talk to: its pid, a writer for its
/// standard input, readers for its output, its exit, `kill(signal:)` and
/// `killGroup(signal:)`, with each stream's connection chosen (`ProcessStdio`).
///
/// Thread rule: safe from any thread.
public enum ChildProcess {
    /// Starts `executable` and sends what it writes and how it exited; completes when its output pipes are done.
    ///
    /// `.exited` comes as soon as the child exits, even while a grandchild
    /// still holds its output pipes; output still in the pipes follows, and
    /// completion comes once both pipes reached EOF (see `ProcessOutput`).
    ///
    /// The process starts when a subscriber arrives. `executable` is looked
    /// up in `PATH` when it has no slash. A program that cannot be started
    /// (missing, not executable) ends the signal with a `UVError` (`ENOENT`,
    /// `EACCES`). Standard input is `input` (then closed) or nothing.
    /// Disposing before the exit sends SIGTERM, then SIGKILL after
    /// `killGrace`; the process handle stays open until the child has gone, so
    /// no zombie is left behind. A loop shutdown kills the child with SIGKILL
    /// and reaps it (a thread of its own waits for it, not the loop's).
    /// It is `spawn` with pipes for output and error, read for you: a consumer
    /// that pauses (a full `values` buffer) pauses the reading of both pipes.
    ///
    /// - Parameters:
    ///   - executable: The program's path or name.
    ///   - arguments: The arguments (without the program name).
    ///   - environment: The whole environment; nil inherits this process's.
    ///   - workingDirectory: Where it runs; nil for the current directory.
    ///   - input: Bytes to write to its standard input, which is then closed; nil for none.
    ///   - killGrace: Time between SIGTERM and SIGKILL after disposal.
    ///   - loop: The loop that runs it; nil for the subscription's home loop.
    /// - Returns: A signal of `.started`, output chunks and `.exited`, then completion once both pipes reached EOF.
    ///
    /// Thread rule: safe from any thread.
    public static func run(
        _ executable: String,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        workingDirectory: String? = nil,
        input: [UInt8]? = nil,
        killGrace: Duration = .seconds(1),
        on loop: EventLoop? = nil
    ) -> Signal<ProcessOutput> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "ChildProcess.run") { loop in
                let run = ProcessRun(loop: loop, subscriber: subscriber)
                run.start(spawn(executable, arguments: arguments, environment: environment, workingDirectory: workingDirectory,
                                standardInput: input == nil ? .ignore : .pipe, killGrace: killGrace, on: loop),
                          input: input)
                return run
            }
        }.debugNamed("+ChildProcess.run(\(executable))")
    }

    /// Starts `executable` and sends one `RunningChild` to talk to; completes once the child exited and its output pipes reached EOF.
    ///
    /// The process starts when a subscriber arrives, and belongs to that
    /// subscription. `executable` is looked up in `PATH` when it has no slash.
    ///
    /// - Each of `standardInput`, `standardOutput` and `standardError` is a
    ///   `.pipe` (the default: a `ChildPipe` on the child, with the stream core's
    ///   write queue, backpressure and limits), `.inherit`, `.ignore` or
    ///   `.descriptor(fd)`.
    /// - The signal completes once the child has exited and every output pipe
    ///   reached EOF: read them (`bytes`) to the end or `close()` them, or
    ///   choose `.ignore` or `.inherit` for output you do not want (a pipe
    ///   nobody reads fills, and the child then waits). A grandchild that keeps a pipe open keeps the
    ///   signal open. On completion the standard input pipe closes.
    /// - It fails with a `UVError` when the program cannot be started
    ///   (`ENOENT`, `EACCES`), a `.descriptor` is not open (`EBADF`), or an
    ///   argument, environment entry, path or executable contains a NUL byte
    ///   (`EINVAL`: it would be cut there); with `EventLoopError.shutDown` when
    ///   the loop shuts down first, which kills a child that is not detached
    ///   with SIGKILL and reaps it (a thread of its own waits for it, so the
    ///   shutdown does not, and no zombie is left).
    /// - Disposing closes the pipes at once. A child still running gets SIGTERM,
    ///   then SIGKILL after `killGrace`, and the process handle stays open until
    ///   the child has gone, so no zombie is left; `exit` still reports it.
    /// - `detached: true` starts the child in a new session (`setsid`), so it
    ///   leads its own process group (`RunningChild.killGroup(signal:)` reaches
    ///   it and everything it started) and no terminal signal of ours reaches
    ///   it. A detached child is not killed by disposal or by the loop's
    ///   shutdown: disposal leaves it running, and the process handle stays
    ///   open until it exits, to reap it (a loop shutdown closes the handle; a
    ///   detached child that exits after that stays a zombie until this
    ///   process exits).
    ///
    /// - Parameters:
    ///   - executable: The program's path or name.
    ///   - arguments: The arguments (without the program name).
    ///   - environment: The whole environment; nil inherits this process's.
    ///   - workingDirectory: Where it runs; nil for the current directory.
    ///   - standardInput: What the child reads (default `.pipe`: write to `RunningChild.standardInput`).
    ///   - standardOutput: Where the child writes its output (default `.pipe`).
    ///   - standardError: Where the child writes its errors (default `.pipe`).
    ///   - detached: Start the child in its own session and process group, and let it outlive the subscription.
    ///   - killGrace: Time between SIGTERM and SIGKILL after disposal.
    ///   - limits: The pipes' write queue and backpressure limits (see `StreamBufferLimits`).
    ///   - loop: The loop that runs it; nil for the subscription's home loop.
    /// - Returns: A signal of one `RunningChild`, completing once it exited and its output pipes reached EOF.
    ///
    /// Thread rule: safe from any thread.
    public static func spawn(
        _ executable: String,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        workingDirectory: String? = nil,
        standardInput: ProcessStdio = .pipe,
        standardOutput: ProcessStdio = .pipe,
        standardError: ProcessStdio = .pipe,
        detached: Bool = false,
        killGrace: Duration = .seconds(1),
        limits: StreamBufferLimits = StreamBufferLimits(),
        on loop: EventLoop? = nil
    ) -> Signal<RunningChild> {
        let request = SpawnRequest(executable: executable, arguments: arguments, environment: environment,
                                   workingDirectory: workingDirectory, stdio: [standardInput, standardOutput, standardError],
                                   detached: detached, killGrace: killGrace, limits: limits)
        return Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "ChildProcess.spawn") { loop in
                let session = ProcessSession(loop: loop, request: request, subscriber: subscriber)
                session.start()
                return session
            }
        }.debugNamed("+ChildProcess.spawn(\(executable))")
    }
}

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
/// `.started` first; then output chunks and, once, `.exited`, sent as soon as the child exits.
/// Output still in the pipes, or from a grandchild that keeps them open, arrives after
/// `.exited`; the signal completes once both pipes reached EOF (never, for a daemon that keeps
/// them). Dispose after `.exited` when that output does not matter.
///
/// `RunningChild.output` sends only the output cases; `ChildProcess.run` sends them all.
///
/// Thread rule: a value type; safe from any thread.
public enum ProcessOutput: Sendable, Hashable {
    /// The process started with this id. Sent once, first.
    case started(pid: Int32)
    /// Bytes the process wrote to its standard output.
    case standardOutput([UInt8])
    /// Bytes the process wrote to its standard error.
    case standardError([UInt8])
    /// The process exited. Sent once; output may follow it.
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
    /// An open descriptor of this process shared with the child; open when `spawn` runs (else
    /// `EBADF`); the caller keeps and closes it.
    case descriptor(Int32)
}

/// Child processes on libuv (`uv_spawn`): `run` streams what a program writes; `spawn` hands over
/// a `RunningChild` (pid, standard input writer, output readers, exit, `kill(signal:)`).
///
/// Thread rule: safe from any thread.
public enum ChildProcess {
    /// Starts `executable` and sends what it writes and how it exited; completes when its output pipes are done.
    ///
    /// It is `spawn` with output pipes read for you (a pausing consumer pauses both) and standard
    /// input `input` (then closed) or nothing; `.exited` may precede the last output (see
    /// `ProcessOutput`). The process starts when a subscriber arrives; `executable` without a slash
    /// is looked up in `PATH`. A program that cannot start fails the signal (`ENOENT`, `EACCES`).
    /// Disposing before the exit sends SIGTERM, then SIGKILL after `killGrace`, and reaps the
    /// child. A loop shutdown kills it with SIGKILL and reaps it off the loop thread.
    ///
    /// - Parameters:
    ///   - executable: The program's path or name.
    ///   - arguments: The arguments (without the program name).
    ///   - environment: The whole environment; nil inherits this process's.
    ///   - workingDirectory: Where it runs; nil for the current directory.
    ///   - input: Bytes to write to its standard input, which is then closed; nil for none.
    ///   - killGrace: Time between SIGTERM and SIGKILL after disposal.
    ///   - loop: The loop that runs it; nil for the subscription's home loop.
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
    /// The process starts when a subscriber arrives and belongs to that subscription;
    /// `executable` without a slash is looked up in `PATH`.
    /// - Read each output `.pipe` to the end or `close()` it, or choose `.ignore`/`.inherit`: a
    ///   pipe nobody reads fills and the child waits. A grandchild holding a pipe keeps the signal
    ///   open. On completion the standard input pipe closes.
    /// - Fails with a `UVError` when the program cannot start (`ENOENT`, `EACCES`), a `.descriptor`
    ///   is not open (`EBADF`), or a string contains a NUL byte (`EINVAL`); with
    ///   `EventLoopError.shutDown` when the loop shuts down first, which kills a child that is not
    ///   detached with SIGKILL and reaps it off the loop thread.
    /// - Disposing closes the pipes at once; a running child gets SIGTERM, then SIGKILL after
    ///   `killGrace`, and is reaped (`exit` still reports it).
    /// - `detached: true` starts the child in a new session (`setsid`): it leads its own process
    ///   group (`killGroup(signal:)`), no terminal signal of ours reaches it, and neither disposal
    ///   nor shutdown kills it (one exiting after a shutdown stays a zombie until this process exits).
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
    ///   - limits: The pipes' write queue and backpressure limits.
    ///   - loop: The loop that runs it; nil for the subscription's home loop.
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

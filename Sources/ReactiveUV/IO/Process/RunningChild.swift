#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A child process started by `ChildProcess.spawn`: its pid, its pipes, its exit, and signals to send it.
///
/// - `standardInput` is a writer (`send`, `write`, `close`, with the stream
///   core's write queue, backpressure figure `queuedWriteByteCount` and
///   `StreamBufferLimits`); `close()` flushes what was written and then gives
///   the child EOF. Writing to a child that closed its input or exited fails
///   with `EPIPE` through the write's result (this process ignores SIGPIPE).
/// - `standardOutput` and `standardError` are read with `bytes` (one reader
///   at a time, paused by a consumer that cannot keep up); each completes at
///   EOF, and the pipe then closes. `output` reads both as one signal, in the
///   order their chunks arrived.
/// - `exit` reports how the child ended, replayed to every subscriber.
/// - `kill(signal:)` signals the child, `killGroup(signal:)` its whole process
///   group (a detached child's: it and everything it started).
///
/// The child belongs to the subscription of `spawn` that sent it (see there
/// for what disposal does). The pipes are nil for streams that were not
/// `.pipe`.
///
/// Thread rule: every member is safe from any thread; work is done on the
/// child's loop (calls made there run at once, others are queued there in order).
public final class RunningChild: @unchecked Sendable, CustomStringConvertible {
    // Every stored property is immutable; `session` is only used on its loop thread (calls hop there).
    let session: ProcessSession

    /// The child's process id.
    ///
    /// Thread rule: safe from any thread.
    public let pid: Int32

    /// The program as it was given to `spawn`.
    ///
    /// Thread rule: safe from any thread.
    public let executable: String

    /// Whether the child was spawned with `detached: true` (its own session and process group).
    ///
    /// Thread rule: safe from any thread.
    public let isDetached: Bool

    /// The writer for the child's standard input, when it is a `.pipe`.
    ///
    /// Thread rule: safe from any thread.
    public let standardInput: ChildPipe?

    /// The child's standard output (read it with `bytes`), when it is a `.pipe`.
    ///
    /// Thread rule: safe from any thread.
    public let standardOutput: ChildPipe?

    /// The child's standard error (read it with `bytes`), when it is a `.pipe`.
    ///
    /// Thread rule: safe from any thread.
    public let standardError: ChildPipe?

    /// The child's standard output and standard error as one signal of `.standardOutput` and
    /// `.standardError` chunks, in the order this process read them; it completes once both pipes
    /// reached EOF.
    ///
    /// For a program that wants both streams interleaved (a log of what a
    /// build printed, say) without merging two signals and tracking two
    /// completions. It sends only those two cases of `ProcessOutput` (the
    /// type `ChildProcess.run` sends, which is this plus `.started` and
    /// `.exited`: here they are `pid` and `exit`). Chunks of one stream keep
    /// their order. Between the two streams, a chunk comes after another when
    /// the child wrote it after this process had read the other (output the
    /// child wrote, then waited for an answer on its standard input before
    /// writing to its standard error, comes first); two writes the child made
    /// back to back to different streams may be read in either order, since
    /// the kernel can report both pipes ready at once.
    ///
    /// Subscribing reads both pipes (the pipes' `bytes` readers, so one
    /// reader at a time: while `standardOutput.bytes` or another `output` is
    /// read, it fails with `EBUSY`); disposing stops both readings (the pipes
    /// stay open). A consumer that cannot keep up pauses both. It fails with
    /// the first error either pipe has (the other's reading stops), with
    /// `EventLoopError.shutDown` when the loop shuts down, and at once with
    /// `EINVAL` when the child's standard output or error is not a `.pipe`
    /// (the message names which and how it was spawned).
    ///
    /// Thread rule: safe from any thread.
    public let output: Signal<ProcessOutput>

    /// How the child ended: one value, then completion, replayed to every subscriber.
    ///
    /// It comes when the child exits, also after the `spawn` subscription was
    /// disposed (the handle waits for the child to reap it). It fails with
    /// `EventLoopError.shutDown` when the loop shut down before the child exited.
    ///
    /// Thread rule: safe from any thread.
    public let exit: Signal<ProcessExit>

    init(session: ProcessSession, pid: Int32, pipes: [ChildPipe?]) {
        self.session = session
        self.pid = pid
        self.executable = session.request.executable
        self.isDetached = session.request.detached
        self.standardInput = pipes[0]
        self.standardOutput = pipes[1]
        self.standardError = pipes[2]
        self.exit = session.exitSubject
        self.output = RunningChild.mergedOutput(of: session, pipes: pipes, child: "\(session.request.executable) (pid \(pid))")
    }

    /// The loop the child's handles live on.
    ///
    /// Thread rule: safe from any thread.
    public var loop: EventLoop { session.loop }

    /// `"cat (pid 4242)"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { "\(executable) (pid \(pid))" }

    /// The highest signal number Linux has (`SIGRTMAX`, `_NSIG - 1`).
    static let highestSignal: Int32 = 64

    /// Sends `signal` to the child.
    ///
    /// The signal is sent on the child's loop, where the exit is reaped, so it
    /// never reaches another process that got the pid after the child was
    /// gone: once the child has exited the result fails with `ESRCH` and
    /// nothing is sent. A number outside 1...64 fails with `EINVAL`.
    ///
    /// - Parameter signal: The signal number (`SIGTERM`, `SIGKILL`, `SIGUSR1`, ...); 15 (`SIGTERM`) by default.
    /// - Returns: A signal (replayed) that completes once the signal was sent, or fails; sending starts now.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func kill(signal: Int32 = 15) -> Signal<Void> {
        send(signal, toGroup: false, what: "kill")
    }

    /// Sends `signal` to the child's whole process group: the child and every process it started that stayed in its group.
    ///
    /// Only a child spawned with `detached: true` has a group of its own (any
    /// other shares this process's group, which the signal would reach too:
    /// that fails with `EINVAL`). It works after the child exited while
    /// processes of its group remain (the group's id stays theirs); once none
    /// is left it fails with `ESRCH`. A number outside 1...64 fails with `EINVAL`.
    ///
    /// - Parameter signal: The signal number; 15 (`SIGTERM`) by default.
    /// - Returns: A signal (replayed) that completes once the signal was sent, or fails; sending starts now.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func killGroup(signal: Int32 = 15) -> Signal<Void> {
        send(signal, toGroup: true, what: "killGroup")
    }

    private func send(_ number: Int32, toGroup: Bool, what: String) -> Signal<Void> {
        let outcome = WriteOutcome()
        guard (1...RunningChild.highestSignal).contains(number) else {
            outcome.finish(UVError(code: UVError.invalidArgumentCode,
                                   message: "signal number must be in 1...\(RunningChild.highestSignal), got \(number)",
                                   context: "\(what)(signal: \(number)) of \(self)"))
            return outcome.signal
        }
        let session = self.session
        if session.loop.inEventLoop {
            session.sendSignal(number, toGroup: toGroup, outcome: outcome)
        } else {
            do {
                try session.loop.tryExecute { session.sendSignal(number, toGroup: toGroup, outcome: outcome) }
            } catch {
                outcome.finish(error)
            }
        }
        return outcome.signal
    }
}

/// One end of a pipe to a child's standard input, output or error: a byte stream on the stream core.
///
/// Write to `RunningChild.standardInput` (`send`, `write`, `close`) and read
/// the others with `bytes`; everything `StreamConnection` describes applies
/// (write queue, backpressure, `StreamBufferLimits`, `close()` flushing before
/// EOF). An output pipe closes by itself once its EOF was read.
///
/// Thread rule: every method is safe from any thread; work is done on the
/// child's loop (calls made there run at once, others are queued there in order).
public final class ChildPipe: StreamConnection, @unchecked Sendable {
    // `role` is immutable (one byte, on child pipes only); the stream core's state is confined to its loop thread.

    /// Which of the child's streams a pipe is.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Role: Sendable, Hashable {
        /// The child's standard input (descriptor 0): this process writes.
        case standardInput
        /// The child's standard output (descriptor 1): this process reads.
        case standardOutput
        /// The child's standard error (descriptor 2): this process reads.
        case standardError

        init(_ descriptor: Int) {
            self = descriptor == 0 ? .standardInput : descriptor == 1 ? .standardOutput : .standardError
        }

        /// "standard input", for messages.
        var name: String {
            switch self {
            case .standardInput: "standard input"
            case .standardOutput: "standard output"
            case .standardError: "standard error"
            }
        }
    }

    /// Which of the child's streams this pipe is.
    ///
    /// Thread rule: safe from any thread.
    public let role: Role

    /// A pipe for the child's `role` stream (not opened yet).
    init(loop: EventLoop, limits: StreamBufferLimits, origin: String, role: Role) {
        self.role = role
        super.init(loop: loop, transport: .childPipe, limits: limits, originLabel: StreamOrigin(origin, limits: limits))
    }

    /// `"standard input of cat (pid 4242)"`.
    ///
    /// Thread rule: safe from any thread.
    public override var description: String { peerDescription }
}

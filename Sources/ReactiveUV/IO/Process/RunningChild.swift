#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A child process started by `ChildProcess.spawn`: its pid, its pipes, its exit, and signals to send it.
///
/// - `standardInput` is a writer with the stream core's write queue and limits; `close()` flushes,
///   then gives the child EOF. Writing after the child closed its input or exited fails with `EPIPE`.
/// - `standardOutput` and `standardError` are read with `bytes` (one reader at a time); each
///   completes at EOF and the pipe closes. `output` reads both as one signal.
/// - `exit` reports how the child ended, replayed to every subscriber.
/// - `kill(signal:)` signals the child, `killGroup(signal:)` its whole process group.
///
/// The child belongs to the `spawn` subscription that sent it. Pipes are nil for streams that were not `.pipe`.
///
/// Thread rule: every member is safe from any thread; work is done on the child's loop (calls
/// made there run at once, others are queued there in order).
public final class RunningChild: @unchecked Sendable, CustomStringConvertible {
    // Sendable: every stored property is immutable; `session` is used only on its loop thread.
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

    /// The child's standard output and error as one signal of chunks, in the order this process
    /// read them; completes once both pipes reached EOF.
    ///
    /// Chunks of one stream keep their order; two writes the child made back to back to different
    /// streams may arrive in either order. Subscribing takes both pipes' `bytes` readers (so
    /// `EBUSY` while another reads them); disposing stops both readings, leaving the pipes open; a
    /// slow consumer pauses both. Fails with the first error either pipe has, with
    /// `EventLoopError.shutDown`, and at once with `EINVAL` when either stream is not a `.pipe`.
    ///
    /// Thread rule: safe from any thread.
    public let output: Signal<ProcessOutput>

    /// How the child ended: one value, then completion, replayed to every subscriber.
    ///
    /// It comes even after the `spawn` subscription was disposed (the handle waits to reap the
    /// child); fails with `EventLoopError.shutDown` when the loop shut down first.
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
    /// Sent on the child's loop, where the exit is reaped, so it never reaches a process that reused
    /// the pid: after the exit it fails with `ESRCH` and nothing is sent. A number outside 1...64
    /// fails with `EINVAL`.
    ///
    /// - Parameter signal: The signal number; 15 (`SIGTERM`) by default.
    /// - Returns: A signal (replayed) that completes once the signal was sent, or fails; sending starts now.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func kill(signal: Int32 = 15) -> Signal<Void> {
        send(signal, toGroup: false, what: "kill")
    }

    /// Sends `signal` to the child's whole process group: the child and what it started in its group.
    ///
    /// Only a `detached: true` child has a group of its own (else `EINVAL`: the signal would reach
    /// this process). It works after the child exited while members remain, then fails with
    /// `ESRCH`. A number outside 1...64 fails with `EINVAL`.
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

/// One end of a pipe to a child's standard input, output or error: a byte stream with everything
/// `StreamConnection` describes. An output pipe closes by itself once its EOF was read.
///
/// Thread rule: every method is safe from any thread; work is done on the child's loop (calls
/// made there run at once, others are queued there in order).
public final class ChildPipe: StreamConnection, @unchecked Sendable {
    // Sendable: `role` is immutable; the stream core's state is confined to its loop thread.

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

    /// A pipe (not opened yet) for each of `request`'s standard streams that is a `.pipe`, in descriptor order.
    static func unopened(for request: SpawnRequest, on loop: EventLoop) -> [ChildPipe?] {
        (0..<3).map { index in
            guard request.stdio[index] == .pipe else { return nil }
            return ChildPipe(loop: loop, limits: request.limits, origin: "from ChildProcess.spawn(\(request.executable))",
                             role: Role(index))
        }
    }

    /// `"standard input of cat (pid 4242)"`.
    ///
    /// Thread rule: safe from any thread.
    public override var description: String { peerDescription }
}

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

/// Child processes on libuv (`uv_spawn` with pipes for standard output and error).
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
    /// no zombie is left behind. A loop shutdown kills the child with SIGKILL.
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
                let session = ProcessSession(loop: loop, executable: executable, killGrace: killGrace, subscriber: subscriber)
                session.spawn(arguments: arguments, environment: environment, workingDirectory: workingDirectory, input: input)
                return session
            }
        }.debugNamed("+ChildProcess.run(\(executable))")
    }
}

/// One running child: its process handle, its pipes, and the subscriber.
final class ProcessSession: LoopDisposable, StreamWriteOwner, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.
    let loop: EventLoop
    private let executable: String
    private let killGrace: Duration
    private var subscriber: Subscriber<ProcessOutput>?
    private var process: ProcessHandle?
    private var standardInput: PipeHandle?
    private var standardOutput: PipeHandle?
    private var standardError: PipeHandle?
    private var exit: ProcessExit?
    private var killTimer: (any Disposable)?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, executable: String, killGrace: Duration, subscriber: Subscriber<ProcessOutput>) {
        _ = ignoreBrokenPipeSignalOnce
        self.loop = loop
        self.executable = executable
        self.killGrace = killGrace
        self.subscriber = subscriber
    }

    func spawn(arguments: [String], environment: [String: String]?, workingDirectory: String?, input: [UInt8]?) {
        let process = ProcessHandle(loop: loop, session: self, executable: executable)
        var pipes: [PipeHandle] = []
        do {
            for role in [PipeHandle.Role.output, .error] + (input == nil ? [] : [.input]) {
                let pipe = PipeHandle(loop: loop, session: self, role: role)
                try pipe.open()
                pipes.append(pipe)
            }
        } catch {
            for pipe in pipes { pipe.close() }
            finish(error)
            return
        }
        standardOutput = pipes[0]
        standardError = pipes[1]
        standardInput = input == nil ? nil : pipes[2]

        var containers = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
        containers[0].flags = UV_IGNORE
        if let standardInput {
            containers[0].flags = uv_stdio_flags(UV_CREATE_PIPE.rawValue | UV_READABLE_PIPE.rawValue)
            containers[0].data.stream = standardInput.stream
        }
        for (index, pipe) in [(1, pipes[0]), (2, pipes[1])] {
            containers[index].flags = uv_stdio_flags(UV_CREATE_PIPE.rawValue | UV_WRITABLE_PIPE.rawValue)
            containers[index].data.stream = pipe.stream
        }
        let commandLine = CStringArray([executable] + arguments)
        let environmentLines = environment.map { CStringArray($0.map { "\($0.key)=\($0.value)" }) }
        // The C strings must outlive uv_spawn, which reads them while it forks and execs.
        let result = withExtendedLifetime((commandLine, environmentLines)) { containers.withUnsafeMutableBufferPointer { stdio in
            executable.withCString { file in
                withOptionalCString(workingDirectory) { directory in
                    var options = uv_process_options_t()
                    options.exit_cb = processExitCallback
                    options.file = file
                    options.args = commandLine.pointer
                    options.env = environmentLines?.pointer
                    options.cwd = directory
                    options.stdio_count = 3
                    options.stdio = stdio.baseAddress
                    return uv_spawn(loop.uvLoop, process.process, &options)
                }
            }
        } }
        // uv_spawn initializes the handle even when it fails, so it must be closed either way.
        process.didOpen()
        self.process = process
        if result < 0 {
            finish(UVError(code: result, context: "spawn \(executable)"))
            return
        }
        subscriber?.sendNext(.started(pid: process.pid))
        for pipe in [standardOutput, standardError] {
            do {
                try pipe?.startReading()
            } catch {
                pipe?.close()
            }
        }
        if let input, let standardInput {
            let request = WriteRequest(loop: loop, owner: self)
            do {
                try request.start(input, to: standardInput.stream)
            } catch {
                standardInput.close()
                self.standardInput = nil
            }
        }
    }

    fileprivate func pipe(_ pipe: PipeHandle, read chunk: [UInt8]) {
        subscriber?.sendNext(pipe.role == .output ? .standardOutput(chunk) : .standardError(chunk))
    }

    /// A pipe reached EOF (or failed): close it, and finish if the process is done too.
    fileprivate func pipeDidEnd(_ pipe: PipeHandle) {
        pipe.close()
        finishIfDone()
    }

    /// The child exited (libuv reaped it): report it now, whoever still holds its pipes.
    fileprivate func processDidExit(status: Int64, signal: Int32) {
        let exit = ProcessExit(status: status, signal: signal)
        self.exit = exit
        killTimer?.dispose()
        killTimer = nil
        // The child is reaped: its handle has nothing more to report (after a disposal it
        // was only kept open until the child was gone).
        process?.close()
        process = nil
        guard let subscriber else { return }
        // Now, not after the pipes' EOF: a grandchild (a daemon) may hold them for a long time.
        subscriber.sendNext(.exited(exit))
        finishIfDone()
    }

    /// Completes once the child has exited and both pipes reached EOF.
    private func finishIfDone() {
        guard exit != nil, standardOutput?.isOpen != true, standardError?.isOpen != true else { return }
        closeAll()?.sendCompleted()
    }

    private func finish(_ error: any Error) {
        closeAll()?.sendError(error)
    }

    /// Closes the pipes and the process handle and lets go of the subscriber, which it returns (to be told the end).
    private func closeAll() -> Subscriber<ProcessOutput>? {
        let subscriber = self.subscriber
        self.subscriber = nil
        for pipe in [standardInput, standardOutput, standardError] { pipe?.close() }
        process?.close()
        process = nil
        killTimer?.dispose()
        killTimer = nil
        return subscriber
    }

    func writeDidFinish(_ request: WriteRequest, status: Int32) {
        // The input was written (or the child stopped reading): close its standard input either way.
        request.reset()
        standardInput?.close()
        standardInput = nil
    }

    /// The process handle's `closeForShutdown`: kill the child, close everything, tell the subscriber.
    fileprivate func shutDown() {
        process?.kill(SIGKILL)
        finish(EventLoopError.shutDown(loop: loop.name))
    }

    /// Stops listening; a child still running gets SIGTERM now and SIGKILL after the grace period.
    func abandon() {
        subscriber = nil
        for pipe in [standardInput, standardOutput, standardError] { pipe?.close() }
        guard let process, process.isOpen else { return }
        if exit != nil {
            process.close()
            self.process = nil
            return
        }
        process.kill(SIGTERM)
        killTimer = loop.schedule(after: killGrace) { [self] in
            killTimer = nil
            self.process?.kill(SIGKILL)
        }
    }
}

/// The `uv_process_t` of a child.
final class ProcessHandle: LoopHandle {
    // Loop thread only. The session and its open handles reference each other until it closes them.
    let session: ProcessSession
    private let executable: String

    init(loop: EventLoop, session: ProcessSession, executable: String) {
        self.session = session
        self.executable = executable
        super.init(loop: loop, byteCount: uv_handle_size(UV_PROCESS))
    }

    override var label: String { "process \(executable) (pid \(isOpen ? pid : 0)) from ChildProcess.run" }

    var process: UnsafeMutablePointer<uv_process_t> { pointer(as: uv_process_t.self) }

    var pid: Int32 { uv_process_get_pid(process) }

    /// Sends `number` to the child; a child that is already gone (ESRCH) is not an error.
    func kill(_ number: Int32) {
        guard isOpen else { return }
        let result = uv_process_kill(process, number)
        if result != UV_ESRCH.rawValue { uvCheckReporting(result, "kill \(pid) with signal \(number)") }
    }

    override func closeForShutdown() {
        session.shutDown()
        close()
    }

    fileprivate func didExit(status: Int64, signal: Int32) {
        session.processDidExit(status: status, signal: signal)
    }
}

private let processExitCallback: uv_exit_cb = { process, status, signal in
    guard let data = process?.pointee.data else { return }
    Unmanaged<ProcessHandle>.fromOpaque(data).takeUnretainedValue().didExit(status: status, signal: signal)
}

/// One `uv_pipe_t` connected to a child's standard input, output or error.
final class PipeHandle: LoopHandle {
    // Loop thread only. The session and its open handles reference each other until it closes them.
    enum Role { case input, output, error }

    let session: ProcessSession
    let role: Role

    init(loop: EventLoop, session: ProcessSession, role: Role) {
        self.session = session
        self.role = role
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE))
    }

    override var label: String { "pipe for a child's \(role == .input ? "input" : role == .output ? "output" : "error") from ChildProcess.run" }

    var stream: UnsafeMutablePointer<uv_stream_t> { pointer(as: uv_stream_t.self) }

    func open() throws(UVError) {
        try uvCheck(uv_pipe_init(loop.uvLoop, pointer(as: uv_pipe_t.self), 0), "uv_pipe_init")
        didOpen()
    }

    func startReading() throws(UVError) {
        try uvCheck(uv_read_start(stream, readBufferAllocate, pipeReadCallback), "uv_read_start")
    }

    override func closeForShutdown() {
        session.shutDown()
        close()
    }

    fileprivate func didRead(_ count: Int, _ buffer: UnsafePointer<uv_buf_t>?) {
        if count > 0 {
            session.pipe(self, read: ReadBuffer.copy(buffer?.pointee.base, count: count))
        } else if count < 0 {
            // EOF, or the child's end broke: either way nothing more comes.
            session.pipeDidEnd(self)
        }
    }
}

private let pipeReadCallback: uv_read_cb = { stream, count, buffer in
    guard let data = stream?.pointee.data else { return }
    Unmanaged<PipeHandle>.fromOpaque(data).takeUnretainedValue().didRead(count, buffer)
}

/// A NULL-terminated array of C strings, freed with the object.
private final class CStringArray {
    // Immutable after init; used only inside one synchronous uv_spawn call.
    let pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    init(_ strings: [String]) {
        count = strings.count
        pointer = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { pointer[index] = strdup(string) }
        pointer[strings.count] = nil
    }

    deinit {
        for index in 0..<count { free(pointer[index]) }
        pointer.deallocate()
    }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

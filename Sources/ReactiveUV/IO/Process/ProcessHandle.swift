internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `ProcessSession` asks of a spawned child's handle, the process family's backend seam:
/// libuv's (`ProcessHandle`) or, on a simulated loop, a program of the simulation
/// (`SimulatedProcessHandle`). Each reports the exit with `session.processDidExit`.
/// Thread rule: loop thread only.
protocol ChildProcessBackend: AnyObject {
    /// The child's process id.
    var pid: Int32 { get }
    /// Sends `number` to the child: 0, or a negative libuv code (`UV_ESRCH` once it is gone).
    func signal(_ number: Int32) -> Int32
    /// Sends `number` to the child; a child that is already gone is not an error.
    func kill(_ number: Int32)
    /// At shutdown: closes the handle before the child exited, killing it first with `kill`.
    func closeLosingChild(kill: Bool)
    /// Closes the handle once the exit was reported.
    func closeAfterExit()
}

/// A child's `uv_process_t`: the real backend of `ChildProcessBackend`. `ProcessSession` asks it
/// to spawn, signal and let go of the child, and hears the exit (`processDidExit`); the pipes
/// are stream-family connections.
/// Thread rule: loop thread only.
final class ProcessHandle: LoopHandle, ChildProcessBackend {
    // The session and the open handle reference each other until the handle closes.
    let session: ProcessSession
    private let executable: String

    init(loop: EventLoop, session: ProcessSession, executable: String) {
        self.session = session
        self.executable = executable
        super.init(loop: loop, byteCount: uv_handle_size(UV_PROCESS))
    }

    override var label: String { "process \(executable) (pid \(isHandleOpen ? pid : 0)) from ChildProcess.spawn" }

    private var process: UnsafeMutablePointer<uv_process_t> { pointer(as: uv_process_t.self) }

    var pid: Int32 { uv_process_get_pid(process) }

    /// Opens the request's pipes and spawns the child: its handle and pipes, or the error (nothing left open).
    static func start(_ request: SpawnRequest, session: ProcessSession) -> Result<(any ChildProcessBackend, [ChildPipe?]), UVError> {
        let pipes = ChildPipe.unopened(for: request, on: session.loop)
        for pipe in pipes {
            do {
                try pipe?.open()
            } catch {
                for pipe in pipes { pipe?.end(.closed) }
                return .failure(error)
            }
        }
        let process = ProcessHandle(loop: session.loop, session: session, executable: request.executable)
        if let error = process.spawn(request, pipes: pipes) {
            for pipe in pipes { pipe?.end(.closed) }
            return .failure(error)
        }
        return .success((process, pipes))
    }

    /// `uv_spawn` with the request's choices; the handle is open after it, or closed again and the error returned.
    func spawn(_ request: SpawnRequest, pipes: [ChildPipe?]) -> UVError? {
        var containers = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
        for index in 0..<3 {
            switch request.stdio[index] {
            case .pipe:
                // Readable or writable from the child's side.
                let direction = index == 0 ? UV_READABLE_PIPE.rawValue : UV_WRITABLE_PIPE.rawValue
                containers[index].flags = uv_stdio_flags(UV_CREATE_PIPE.rawValue | direction)
                containers[index].data.stream = pipes[index]?.uvStream
            case .inherit:
                containers[index].flags = UV_INHERIT_FD
                containers[index].data.fd = Int32(index)
            case .ignore:
                containers[index].flags = UV_IGNORE
            case .descriptor(let descriptor):
                containers[index].flags = UV_INHERIT_FD
                containers[index].data.fd = descriptor
            }
        }
        let commandLine = CStringArray([executable] + request.arguments)
        let environmentLines = request.environment.map { CStringArray($0.map { "\($0.key)=\($0.value)" }) }
        let flags = request.detached ? UV_PROCESS_DETACHED.rawValue : 0
        // The C strings must outlive uv_spawn, which reads them while it forks and execs.
        let result = withExtendedLifetime((commandLine, environmentLines)) { containers.withUnsafeMutableBufferPointer { stdio in
            executable.withCString { file in
                withOptionalCString(request.workingDirectory) { directory in
                    var options = uv_process_options_t()
                    options.exit_cb = processExitCallback
                    options.file = file
                    options.args = commandLine.pointer
                    options.env = environmentLines?.pointer
                    options.cwd = directory
                    options.flags = flags
                    options.stdio_count = 3
                    options.stdio = stdio.baseAddress
                    return uv_spawn(loop.uvLoop, process, &options)
                }
            }
        } }
        // uv_spawn initializes the handle even when it fails, so it must be closed either way.
        didOpen()
        guard result < 0 else { return nil }
        closeHandle()
        return UVError(code: result, context: "spawn \(executable)")
    }

    /// Sends `number` to the child: libuv's result (`UV_ESRCH` once it is gone).
    func signal(_ number: Int32) -> Int32 {
        uv_process_kill(process, number)
    }

    /// Sends `number` to the process group `pid` leads (a detached child's).
    static func signalGroup(_ pid: Int32, _ number: Int32) -> Int32 {
        uv_kill(-pid, number)
    }

    /// Sends `number` to the child; a child that is already gone is not an error.
    func kill(_ number: Int32) {
        guard isHandleOpen else { return }
        let result = signal(number)
        if result != UV_ESRCH.rawValue { uvCheckReporting(result, "kill \(pid) with signal \(number)") }
    }

    /// At shutdown: closes the handle before the child exited, killing it first with `kill`.
    func closeLosingChild(kill: Bool) {
        let pid = self.pid
        if kill { self.kill(SIGKILL) }
        closeHandle()
        // libuv reaps only the pids of open process handles: without this the killed child stays a zombie.
        if kill { ChildReaper.reap(pid) }
    }

    func closeAfterExit() { closeHandle() }

    override func closeForShutdown() {
        session.shutDown()
        closeHandle()
    }

    fileprivate func didExit(status: Int64, signal: Int32) {
        session.processDidExit(status: status, signal: signal)
    }
}

private let processExitCallback: uv_exit_cb = { process, status, signal in
    guard let data = process?.pointee.data else { return }
    Unmanaged<ProcessHandle>.fromOpaque(data).takeUnretainedValue().didExit(status: status, signal: signal)
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

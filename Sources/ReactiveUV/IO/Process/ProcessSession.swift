internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `ChildProcess.spawn` was asked for, checked at the door.
struct SpawnRequest: Sendable {
    let executable: String
    let arguments: [String]
    let environment: [String: String]?
    let workingDirectory: String?
    /// Standard input, output and error, in that order.
    let stdio: [ProcessStdio]
    let detached: Bool
    let killGrace: Duration
    let limits: StreamBufferLimits

    /// Why the request cannot be spawned as given, or nil.
    func validationError() -> UVError? {
        let context = "ChildProcess.spawn(\(executable))"
        // C strings end at the first NUL: the child would get a cut argument, silently.
        var strings = [("the executable", executable)] + arguments.enumerated().map { ("argument \($0.offset + 1)", $0.element) }
        if let workingDirectory { strings.append(("the working directory", workingDirectory)) }
        for (key, value) in environment ?? [:] {
            if key.isEmpty || key.contains("=") {
                return UVError(code: UVError.invalidArgumentCode,
                               message: "environment name \"\(key)\" is empty or contains \"=\"", context: context)
            }
            strings.append(("environment entry \(key)", key + value))
        }
        for (what, string) in strings where string.utf8.contains(0) {
            return UVError(code: UVError.invalidArgumentCode,
                           message: "\(what) contains a NUL byte, where a C string would end", context: context)
        }
        for (index, choice) in stdio.enumerated() {
            let descriptor: Int32
            switch choice {
            case .descriptor(let given): descriptor = given
            case .inherit: descriptor = Int32(index)
            case .pipe, .ignore: continue
            }
            // The child would fail in its dup2 after the fork; say which descriptor here instead.
            if descriptor < 0 || fcntl(descriptor, F_GETFD) == -1 {
                return UVError(code: UV_EBADF.rawValue,
                               message: "descriptor \(descriptor) for the child's \(ChildPipe.Role(index).name) is not open in this process",
                               context: context)
            }
        }
        return nil
    }
}

/// One spawned child: its process handle, its pipes, its exit, and the subscriber of `spawn`.
final class ProcessSession: LoopDisposable, StreamConnectionOwner, @unchecked Sendable {
    // Loop thread only (`dispose()` and `RunningChild`'s calls hop there), except the immutable
    // `loop`, `request`, `exitSubject` (thread-safe) and the atomic `disposedFlag`.
    private enum Life {
        /// `uv_spawn` has not run (or failed).
        case starting
        /// The child runs; its handle waits for the exit.
        case running(ProcessHandle, pid: Int32)
        /// The child exited and was reaped.
        case exited(ProcessExit, pid: Int32)
        /// The loop shut down before the child exited: the handle is closed, the exit unknown.
        case lost(pid: Int32)
    }

    let loop: EventLoop
    let request: SpawnRequest
    /// The exit, replayed: `RunningChild.exit`.
    let exitSubject = ReplaySubject<ProcessExit>(capacity: 1)
    let disposedFlag = Atomic<Bool>(false)
    private var life = Life.starting
    private var subscriber: Subscriber<RunningChild>?
    /// Standard input, output and error when they are pipes; nil once ended.
    private var pipes: [ChildPipe?] = [nil, nil, nil]
    private var killTimer: (any Disposable)?

    init(loop: EventLoop, request: SpawnRequest, subscriber: Subscriber<RunningChild>) {
        self.loop = loop
        self.request = request
        self.subscriber = subscriber
    }

    private var executable: String { request.executable }

    // MARK: - starting

    func start() {
        if let error = request.validationError() {
            finish(error)
            return
        }
        var opened: [ChildPipe?] = [nil, nil, nil]
        for index in 0..<3 where request.stdio[index] == .pipe {
            let pipe = ChildPipe(loop: loop, limits: request.limits, origin: "from ChildProcess.spawn(\(executable))",
                                 role: ChildPipe.Role(index))
            do {
                try pipe.open()
            } catch {
                for pipe in opened { pipe?.end(.closed) }
                finish(error)
                return
            }
            opened[index] = pipe
        }
        let process = ProcessHandle(loop: loop, session: self, executable: executable)
        let result = spawn(process, pipes: opened)
        // uv_spawn initializes the handle even when it fails, so it must be closed either way.
        process.didOpen()
        if result < 0 {
            process.closeHandle()
            for pipe in opened { pipe?.end(.closed) }
            finish(UVError(code: result, context: "spawn \(executable)"))
            return
        }
        let pid = process.pid
        life = .running(process, pid: pid)
        for pipe in opened {
            guard let pipe else { continue }
            pipe.peerDescription = "\(pipe.role.name) of \(executable) (pid \(pid))"
            pipe.owner = self
        }
        pipes = opened
        let child = RunningChild(session: self, pid: pid, pipes: opened)
        subscriber?.sendNext(child)
    }

    /// `uv_spawn` with the request's arguments, environment and stdio choices.
    private func spawn(_ process: ProcessHandle, pipes: [ChildPipe?]) -> Int32 {
        var containers = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
        for index in 0..<3 {
            switch request.stdio[index] {
            case .pipe:
                // Readable/writable from the child's side: it reads its input, writes its output.
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
        return withExtendedLifetime((commandLine, environmentLines)) { containers.withUnsafeMutableBufferPointer { stdio in
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
                    return uv_spawn(loop.uvLoop, process.process, &options)
                }
            }
        } }
    }

    // MARK: - signals to the child

    /// Sends `number` to the child (or its group); `outcome` learns whether it was sent.
    func sendSignal(_ number: Int32, toGroup: Bool, outcome: WriteOutcome) {
        if toGroup {
            let pid: Int32
            switch life {
            case .running(_, let id), .exited(_, let id), .lost(let id): pid = id
            case .starting: return outcome.finish(UVError(code: UV_ESRCH.rawValue, message: "the child has not started"))
            }
            let context = "killGroup(signal: \(number)) of \(executable) (group \(pid))"
            guard request.detached else {
                return outcome.finish(UVError(code: UVError.invalidArgumentCode,
                                              message: "killGroup needs a child spawned with detached: true; this one is in this process's own group, which the signal would reach",
                                              context: context))
            }
            // The group's id stays taken while any member lives, even after the leader was reaped.
            let result = uv_kill(-pid, number)
            if result == UV_ESRCH.rawValue {
                return outcome.finish(UVError(code: result, message: "no process is left in the child's group", context: context))
            }
            return outcome.finish(result < 0 ? UVError(code: result, context: context) : nil)
        }
        switch life {
        case .running(let process, let pid):
            let result = uv_process_kill(process.process, number)
            outcome.finish(result < 0 ? UVError(code: result, context: "kill(signal: \(number)) of \(executable) (pid \(pid))") : nil)
        case .exited(let exit, let pid):
            // Never kill(2) a reaped pid: another process may have it by now.
            outcome.finish(UVError(code: UV_ESRCH.rawValue,
                                   message: "the child already exited (\(exit)); no signal was sent, as its pid may belong to another process now",
                                   context: "kill(signal: \(number)) of \(executable) (pid \(pid))"))
        case .lost(let pid):
            outcome.finish(UVError(code: UV_ESRCH.rawValue, message: "the loop shut down, and no longer watches the child",
                                   context: "kill(signal: \(number)) of \(executable) (pid \(pid))"))
        case .starting:
            outcome.finish(UVError(code: UV_ESRCH.rawValue, message: "the child has not started"))
        }
    }

    // MARK: - events

    /// The child exited (libuv reaped it): report it now, whoever still holds its pipes.
    fileprivate func processDidExit(status: Int64, signal: Int32) {
        guard case .running(let process, let pid) = life else { return }
        let exit = ProcessExit(status: status, signal: signal)
        life = .exited(exit, pid: pid)
        killTimer?.dispose()
        killTimer = nil
        process.closeHandle()
        exitSubject.sendNext(exit)
        exitSubject.sendCompleted()
        finishIfDone()
    }

    func streamDidReadEndOfFile(_ stream: StreamConnection) {
        // An output pipe at EOF has nothing more to give: close it (so the signal can complete).
        if stream === pipes[1] || stream === pipes[2] { stream.end(.closed) }
    }

    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {
        if case .shutDown = reason {
            shutDown()
        } else {
            finishIfDone()
        }
    }

    /// Completes once the child has exited and both output pipes ended.
    private func finishIfDone() {
        guard case .exited = life, subscriber != nil, pipes[1]?.isHandleOpen != true, pipes[2]?.isHandleOpen != true else { return }
        finish(nil)
    }

    /// Ends the subscriber (completion for nil) after closing the pipes.
    private func finish(_ error: (any Error)?) {
        let subscriber = self.subscriber
        self.subscriber = nil
        closePipes()
        if let error { subscriber?.sendError(error) } else { subscriber?.sendCompleted() }
    }

    private func closePipes() {
        let pipes = self.pipes
        self.pipes = [nil, nil, nil]
        for pipe in pipes { pipe?.end(.closed) }
    }

    /// The loop is shutting down (the process handle or a pipe was told): kill a child that is not detached, tell everyone.
    fileprivate func shutDown() {
        killTimer?.dispose()
        killTimer = nil
        if case .running(let process, let pid) = life {
            if !request.detached { process.kill(SIGKILL) }
            life = .lost(pid: pid)
            process.closeHandle()
            // libuv reaps only the pids of open process handles: without this the killed child stays a zombie.
            if !request.detached { ChildReaper.reap(pid) }
        }
        let error = EventLoopError.shutDown(loop: loop.name)
        exitSubject.sendError(error)
        finish(error)
    }

    /// Stops listening and closes the pipes; a child still running gets SIGTERM now and SIGKILL after the grace period (unless detached).
    func abandon() {
        subscriber = nil
        closePipes()
        // The handle stays open until the child exits, so that it is reaped.
        guard case .running(let process, _) = life, !request.detached else { return }
        process.kill(SIGTERM)
        killTimer = loop.schedule(after: request.killGrace) { [self] in
            killTimer = nil
            if case .running(let process, _) = life { process.kill(SIGKILL) }
        }
    }
}

/// The `uv_process_t` of a child.
final class ProcessHandle: LoopHandle {
    // Loop thread only. The session and its open handle reference each other until the handle closes.
    let session: ProcessSession
    private let executable: String

    init(loop: EventLoop, session: ProcessSession, executable: String) {
        self.session = session
        self.executable = executable
        super.init(loop: loop, byteCount: uv_handle_size(UV_PROCESS))
    }

    override var label: String { "process \(executable) (pid \(isHandleOpen ? pid : 0)) from ChildProcess.spawn" }

    var process: UnsafeMutablePointer<uv_process_t> { pointer(as: uv_process_t.self) }

    var pid: Int32 { uv_process_get_pid(process) }

    /// Sends `number` to the child; a child that is already gone (ESRCH) is not an error.
    func kill(_ number: Int32) {
        guard isHandleOpen else { return }
        let result = uv_process_kill(process, number)
        if result != UV_ESRCH.rawValue { uvCheckReporting(result, "kill \(pid) with signal \(number)") }
    }

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

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
    // Sendable: loop thread only (`dispose()` and `RunningChild`'s calls hop there), except the
    // immutable `loop`, `request`, the thread-safe `exitSubject` and the atomic `disposedFlag`.
    private enum Life {
        /// `uv_spawn` has not run (or failed).
        case starting
        /// The child runs; its handle waits for the exit.
        case running(any ChildProcessBackend, pid: Int32)
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
        let started = loop.simulatedSystem.map { SimulatedProcessHandle.start(request, session: self, system: $0) }
            ?? ProcessHandle.start(request, session: self)
        let process: any ChildProcessBackend, opened: [ChildPipe?]
        switch started {
        case .success(let spawned): (process, opened) = spawned
        case .failure(let error): return finish(error)
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
            // The group's id stays taken while any member lives, even after the leader was reaped. A
            // simulated child starts nothing, so its group is itself; no real process gets the signal.
            var result = UV_ESRCH.rawValue
            if !loop.isSimulated {
                result = ProcessHandle.signalGroup(pid, number)
            } else if case .running(let process, _) = life {
                result = process.signal(number)
            }
            if result == UV_ESRCH.rawValue {
                return outcome.finish(UVError(code: result, message: "no process is left in the child's group", context: context))
            }
            return outcome.finish(result < 0 ? UVError(code: result, context: context) : nil)
        }
        switch life {
        case .running(let process, let pid):
            let result = process.signal(number)
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
    func processDidExit(status: Int64, signal: Int32) {
        guard case .running(let process, let pid) = life else { return }
        let exit = ProcessExit(status: status, signal: signal)
        life = .exited(exit, pid: pid)
        killTimer?.dispose()
        killTimer = nil
        process.closeAfterExit()
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
        subscriber?.sendEnd(failure: error)
    }

    private func closePipes() {
        let pipes = self.pipes
        self.pipes = [nil, nil, nil]
        for pipe in pipes { pipe?.end(.closed) }
    }

    /// The loop is shutting down: kill a child that is not detached, tell everyone.
    func shutDown() {
        killTimer?.dispose()
        killTimer = nil
        if case .running(let process, let pid) = life {
            life = .lost(pid: pid)
            process.closeLosingChild(kill: !request.detached)
        }
        let error = EventLoopError.shutDown(loop: loop.name)
        exitSubject.sendError(error)
        finish(error)
    }

    /// Closes the pipes; a running child that is not detached gets SIGTERM now and SIGKILL after the grace period.
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

internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A child process on a simulated loop: the simulated side of `ChildProcessBackend`, picked by
/// `ProcessSession` when the loop has a `SimulatedSystem`.
///
/// Spawning looks the executable up among the simulation's programs (`ENOENT` when none has the
/// name, as `execvp` says), connects each `.pipe` to the child over a pair of simulated stream
/// ends, and runs the program as the next callback of the loop (after `spawn` handed the child
/// out, as exec follows fork). Signals go to the child (`SimulatedChildProcess.receive`); the
/// exit comes back a callback after the child ended, as SIGCHLD would. It is listed with the loop
/// like a libuv handle (the leak check sees a child still running) and closes as a callback.
///
/// Thread rule: loop thread only.
final class SimulatedProcessHandle: LoopHandle, ChildProcessBackend {
    // The session and the open handle reference each other until the handle closes, as with libuv's.
    let session: ProcessSession
    let child: SimulatedChildProcess

    private init(session: ProcessSession, child: SimulatedChildProcess) {
        self.session = session
        self.child = child
        super.init(loop: session.loop, byteCount: uv_handle_size(UV_PROCESS))
    }

    override var label: String { "process \(child.executable) (pid \(child.pid)) from ChildProcess.spawn (simulated)" }

    var pid: Int32 { child.pid }

    /// Spawns `request`'s program of `system`: the handle and the parent's pipes, or the error
    /// (nothing is opened then).
    static func start(_ request: SpawnRequest, session: ProcessSession,
                      system: SimulatedSystem) -> Result<(any ChildProcessBackend, [ChildPipe?]), UVError> {
        let loop = session.loop
        let context = "spawn \(request.executable)"
        guard let program = system.program(for: request.executable) else {
            return .failure(UVError(code: UVError.noSuchFileCode,
                                    message: "no program of the simulation has this name (Simulation.addProgram)",
                                    context: context))
        }
        for (index, choice) in request.stdio.enumerated() {
            if case .descriptor(let descriptor) = choice {
                return .failure(loop.simulationRefusal(
                    "Process", what: "a child's \(ChildPipe.Role(index).name) on descriptor \(descriptor) of this process"))
            }
        }
        let (number, pid) = system.nextChild()
        let child = SimulatedChildProcess(request: request, number: number, pid: pid, loop: loop, system: system)
        let pipes = ChildPipe.unopened(for: request, on: loop)
        for (index, pipe) in pipes.enumerated() {
            guard let pipe else { continue }
            let parentEnd = SimulatedStreamEnd(loop: loop, latency: .zero)
            let childEnd = SimulatedStreamEnd(loop: loop, latency: .zero)
            SimulatedStreamEnd.connect(parentEnd, childEnd)
            parentEnd.isOneWayPipe = true
            childEnd.isOneWayPipe = true
            pipe.openSimulated(parentEnd)
            child.attach(childEnd, descriptor: index)
        }
        let handle = SimulatedProcessHandle(session: session, child: child)
        handle.didOpenSimulated(as: UV_PROCESS)
        child.handle = handle
        if let crash = system.crash(forChild: number) { child.armCrash(at: crash.at, signal: crash.signal) }
        let body = UncheckedSendable(program)
        loop.execute { child.run(body.value) }
        return .success((handle, pipes))
    }

    /// Signals the child (one that exited and is not reported yet takes it and ignores it, as a
    /// zombie does); `UV_ESRCH` once the handle closed.
    func signal(_ number: Int32) -> Int32 {
        guard isHandleOpen else { return UV_ESRCH.rawValue }
        child.receive(signal: number)
        return 0
    }

    func kill(_ number: Int32) {
        _ = signal(number)
    }

    func closeLosingChild(kill: Bool) {
        // Killed, or (detached) left to run with nothing to run it: the program's state ends with
        // the loop either way, so nothing it keeps outlives the simulation. Nobody hears of it.
        child.end(ProcessExit(status: 0, signal: SIGKILL), report: false)
        closeAfterExit()
    }

    func closeAfterExit() {
        closeSimulatedHandle()
    }

    override func closeForShutdown() {
        session.shutDown()
        closeAfterExit()
    }

    /// The child ended: the session hears it now (a callback after the child's end).
    func childDidExit(_ exit: ProcessExit) {
        session.processDidExit(status: exit.status, signal: exit.signal)
    }
}

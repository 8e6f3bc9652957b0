internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A simulated child process as its program sees it: the request it was spawned with, its
/// standard input to read, its output and error to write, the signals it takes, and its end.
///
/// Each `.pipe` is a stream on the loop (the child's end of the pipe the parent holds), so the
/// parent's writes, EOF and close reach it as they would a process. Ending (`exit`, a fatal
/// signal, a crash fault) closes its input, flushes and closes its outputs (what it wrote is
/// read before EOF, as from a pipe's buffer), ends its signal subscriptions without a word,
/// disposes its `lifetime` (what the program kept: timers, subscriptions), and
/// tells the parent two loop turns later (after the parent read what was written before the end). A fatal signal is any but SIGCHLD, SIGURG, SIGWINCH, SIGCONT
/// (ignored) and SIGSTOP and the terminal stops (ignored too: the simulation does not stop
/// children), unless the program subscribed to it; SIGKILL cannot be taken. Writing to an output
/// whose reader closed kills the child with SIGPIPE, as the default action does.
///
/// Thread rule: loop thread only (the spawning loop's; the simulation's driving thread).
package final class SimulatedChildProcess: StreamConnectionOwner, CustomStringConvertible, @unchecked Sendable {
    // Sendable: every stored var is touched on `loop`'s thread only; the signal factory hops there.
    private enum Stdio {
        case pipe(StreamConnection)
        case ignore
        case inherit
    }

    /// Its number among the simulation's children, from 1 in spawn order (crash faults name it).
    package let number: Int
    /// Its (simulated) process id.
    package let pid: Int32
    /// The executable as `spawn` was given it.
    package let executable: String
    /// The arguments, without the program name.
    package let arguments: [String]
    /// The environment `spawn` was given; nil when it inherits this process's.
    package let environment: [String: String]?
    /// The working directory `spawn` was given; nil for the current one.
    package let workingDirectory: String?
    /// The loop its callbacks run on (the spawning loop).
    package let loop: EventLoop
    private let system: SimulatedSystem
    private var stdio: [Stdio]
    /// How it ended; nil while it runs.
    package private(set) var exitStatus: ProcessExit?
    weak var handle: SimulatedProcessHandle?
    private var crashTimer: (any Disposable)?
    private var signalSubscribers: [(numbers: Set<Int32>, subscriber: Subscriber<Int32>)] = []
    /// What the program keeps while the child lives (its timers, its subscriptions): disposed when
    /// the child ends, as a process's timers and reads die with it.
    package let lifetime = CompoundDisposable()

    init(request: SpawnRequest, number: Int, pid: Int32, loop: EventLoop, system: SimulatedSystem) {
        self.number = number
        self.pid = pid
        executable = request.executable
        arguments = request.arguments
        environment = request.environment
        workingDirectory = request.workingDirectory
        self.loop = loop
        self.system = system
        stdio = request.stdio.map { choice -> Stdio in choice == .inherit ? .inherit : .ignore }
    }

    /// `"wc (pid 1001)"`.
    package var description: String { "\(executable) (pid \(pid))" }

    /// Opens the child's end of the pipe for `descriptor` over `end`.
    func attach(_ end: SimulatedStreamEnd, descriptor: Int) {
        let role = ChildPipe.Role(descriptor)
        let stream = StreamConnection(loop: loop, transport: .childPipe, limits: StreamBufferLimits(),
                                      origin: "(the child's end, in simulated program \(executable) pid \(pid))")
        stream.peerDescription = role.name
        stream.openSimulated(end)
        stream.owner = self
        stdio[descriptor] = .pipe(stream)
    }

    /// Runs the program, unless the child was killed before it could start.
    func run(_ program: SimulatedSystem.Program) {
        guard exitStatus == nil else { return }
        program(self)
    }

    // MARK: - what the program does

    /// Standard input as chunks, completing at EOF: the pipe, nothing (`.ignore`: EOF at once), or
    /// the simulation's standard input (`.inherit`).
    package var standardInput: Signal<[UInt8]> {
        switch stdio[0] {
        case .pipe(let stream): stream.bytes
        case .ignore: .empty
        case .inherit: StandardIO.input(on: loop)
        }
    }

    /// Writes `bytes` to descriptor 1 or 2: into its pipe, nowhere (`.ignore`), or into the
    /// simulation's captured output (`.inherit`). Nothing once the child ended.
    package func write(_ bytes: [UInt8], to descriptor: Int32) {
        loop.assertInEventLoop()
        guard exitStatus == nil, descriptor == 1 || descriptor == 2, !bytes.isEmpty else { return }
        switch stdio[Int(descriptor)] {
        case .pipe(let stream): stream.send(bytes)
        case .ignore: break
        case .inherit:
            // The reader of our own output went away: the child's write gets SIGPIPE, as ours would.
            if system.capture(bytes, descriptor: descriptor, on: loop) != nil {
                end(ProcessExit(status: 0, signal: SIGPIPE), report: true)
            }
        }
    }

    /// The signals among `numbers` sent to the child while subscribed, instead of their default
    /// action; `EINVAL` for a number outside 1...64 or SIGKILL or SIGSTOP (which cannot be caught).
    package func signals(_ numbers: [Int32]) -> Signal<Int32> {
        Signal { [self] subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "SimulatedChild.signals") { [self] _ in
                if let bad = numbers.first(where: { !SimulatedSignalWatch.catchable($0) }) {
                    subscriber.sendError(UVError(code: UVError.invalidArgumentCode,
                                                 message: "signal \(bad) cannot be caught (1...64, not SIGKILL or SIGSTOP)",
                                                 context: "signals of simulated child \(self)"))
                    return nil
                }
                guard exitStatus == nil else {
                    subscriber.sendCompleted()
                    return nil
                }
                signalSubscribers.append((Set(numbers), subscriber))
                return ActionDisposable { [self] in
                    // Disposal runs on the subscription's home (the loop), as the factory did.
                    signalSubscribers.removeAll { $0.subscriber === subscriber }
                }
            }
        }
    }

    /// Exits with `status`.
    package func exit(status: Int64) {
        loop.assertInEventLoop()
        end(ProcessExit(status: status, signal: 0), report: true)
    }

    /// Dies by `signal` (a number outside 1...64 is noted as a problem of the run, and kills with SIGKILL).
    package func die(signal: Int32) {
        loop.assertInEventLoop()
        guard exitStatus == nil else { return }
        var number = signal
        if !(1...64).contains(signal) {
            system.problems.append("simulated child \(self) was told to die by signal \(signal), outside 1...64: it died by SIGKILL")
            number = SIGKILL
        }
        end(ProcessExit(status: 0, signal: number), report: true)
    }

    // MARK: - what happens to it

    /// A signal sent to the child: handled a callback later (by the program's subscription, or
    /// by its default action); nothing once it ended.
    func receive(signal number: Int32) {
        guard exitStatus == nil else { return }
        loop.execute { [self] in deliver(number) }
    }

    private func deliver(_ number: Int32) {
        guard exitStatus == nil else { return }
        let takers = number == SIGKILL ? [] : signalSubscribers.filter { $0.numbers.contains(number) }
        if !takers.isEmpty {
            for taker in takers { taker.subscriber.sendNext(number) }
        } else if !SimulatedSignalWatch.ignoredByDefault(number) {
            end(ProcessExit(status: 0, signal: number), report: true)
        }
    }

    /// A crash fault: killed by `signal` at `at` (virtual nanoseconds; now if passed), unless it ended first.
    func armCrash(at: UInt64, signal: Int32) {
        let now = loop.now.nanoseconds
        crashTimer = loop.schedule(after: .nanoseconds(Int64(clamping: at > now ? at - now : 0))) { [self] in
            crashTimer = nil
            end(ProcessExit(status: 0, signal: signal), report: true)
        }
    }

    /// Ends the child: its input closes, its outputs flush and close, its signal subscriptions end
    /// silently; the parent hears of it a callback later (when `report`). Once.
    func end(_ exit: ProcessExit, report: Bool) {
        guard exitStatus == nil else { return }
        exitStatus = exit
        crashTimer.take()?.dispose()
        let subscribers = signalSubscribers
        signalSubscribers = []
        for taken in subscribers { taken.subscriber.disposable.dispose() }
        lifetime.dispose()
        for (descriptor, choice) in stdio.enumerated() {
            guard case .pipe(let stream) = choice else { continue }
            if descriptor == 0 { stream.end(.closed) } else { stream.closeWhenFlushed(outcome: nil) }
        }
        guard report else { return }
        // Two turns: what it wrote lands (one turn) and is read (another) before the exit is
        // reported, as a pipe's buffer is usually read before SIGCHLD is handled; EOF may follow.
        let loop = self.loop
        loop.execute { [self] in loop.execute { [self] in handle?.childDidExit(exit) } }
    }

    // MARK: - its pipes

    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {
        // The reader of an output went away: the write's SIGPIPE kills the child.
        guard case .failed(let error) = reason, (error as? UVError)?.code == UV_EPIPE.rawValue else { return }
        end(ProcessExit(status: 0, signal: SIGPIPE), report: true)
    }

    func streamDidReadEndOfFile(_ stream: StreamConnection) {}
}

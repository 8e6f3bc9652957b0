internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One Unix socket server subscription's share of one loop: the listening `uv_pipe_t` when it
/// listens, and the connections homed on this loop.
///
/// The one listener path: a server on one loop is one of these (it binds, listens and homes
/// every connection); a server on a group (`UnixGroupListener`) is one of these per loop: the
/// first loop's listens and hands each accepted connection to the next share in turn (itself
/// included), which homes it; the others have no socket. Accepting, the limit, draining and
/// ending the connections are the same for all.
final class UnixListener: LoopHandle, LoopDisposable, DrainableListener, @unchecked Sendable {
    // Loop thread only (`dispose()` and the hand-off hop there), except the immutable settings and
    // the atomic `disposedFlag`.

    /// What this share does.
    enum Role {
        /// Binds the path and listens (a server on one loop, or a group's first loop).
        case listens
        /// Has no socket: homes the connections the group's first loop hands it.
        case homes
    }

    /// Whom the listener tells.
    struct Callbacks {
        /// Told `.listening` (a listening share), then each `.accepted` (on the connection's loop) and `.refused`.
        var onEvent: (UnixSocket.Event) -> Void
        /// Told the error that ended the listener.
        var onError: (any Error) -> Void
    }

    private let role: Role
    private let path: String
    private let backlog: ListenBacklog
    private let options: UnixSocketOptions
    /// The open connections of the whole server (shared by a group's shares), against `maxConnections`.
    private let budget: ConnectionBudget
    /// What made the listener, for labels: "UnixSocket.listen", or with the loop for a group's share.
    private let origin: String
    /// What its accepted connections say made them, with the socket path as their peer: composed at
    /// the first accept and shared by every connection homed here (`acceptedOrigin`).
    private var sharedOrigin: StreamOrigin?
    /// nil once the listener ended.
    private var callbacks: Callbacks?
    private var name: UnixSocketPath?
    /// The socket file this listener created, removed when it closes (if it is still that file).
    private var createdFile: FileIdentity?
    /// The path's lock, held from before the bind until the socket file is removed (see `UnixSocketLock`).
    private var pathLock: UnixSocketLock?
    /// The connections homed on this loop (their owner).
    let accepted: AcceptedStreams
    /// Where a drain stands (see `DrainableListener`).
    var drainState = DrainState.serving
    /// The subscription to a single-loop server's drain requests (a group's are the coordinator's).
    var drainRequests: (any Disposable)?
    /// A group's listening share: every share (itself included), which take the accepted
    /// connections in turn. Empty for a server on one loop. Set before `start()`.
    var homes: [UnixListener] = []
    /// The index in `homes` of the share the next connection goes to.
    private var nextHome = 0
    /// The repeating check of `UnixSocketOptions.idleTimeout`, while there is one: every share has its own,
    /// the listening one from `start`, the others from their first connection.
    private var idleTimer: (any Disposable)?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, role: Role, path: String, backlog: ListenBacklog, options: UnixSocketOptions,
         budget: ConnectionBudget, inGroup: Bool, callbacks: Callbacks) {
        self.role = role
        self.path = path
        self.backlog = backlog
        self.options = options
        self.budget = budget
        self.callbacks = callbacks
        origin = inGroup ? "UnixSocket.listen(on: group) on loop '\(loop.name)'" : "UnixSocket.listen"
        accepted = AcceptedStreams(budget: budget)
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE))
    }

    override var label: String { "unix socket listener on \(name?.description ?? UnixSocketPath.display(path)) from \(origin)" }

    /// Checks the path, binds (removing a stale file if asked), sets the permissions, and listens;
    /// then says `.listening`. A share that only homes connections has nothing to start.
    func start(_ what: String) {
        if let refusal = ListenerIdleCheck.refusal(of: options.idleTimeout, option: "UnixSocketOptions.idleTimeout",
                                                   context: "\(what)(\(UnixSocketPath.display(path)))")
            ?? ConnectionBudget.refusal(of: options.maxConnections, option: "UnixSocketOptions.maxConnections",
                                        context: "\(what)(\(UnixSocketPath.display(path)))")
            ?? backlog.refusal(context: "\(what)(\(UnixSocketPath.display(path)))") {
            fail(refusal)
            return
        }
        // Drained before it started (a drain request arrived first): nothing to listen for.
        guard case .serving = drainState else { return }
        startIdleTimer()
        guard case .listens = role else { return }
        let context = "\(what)(\(UnixSocketPath.display(path)))"
        do throws(UVError) {
            let name = try UnixSocketPath(path, context: context)
            self.name = name
            let bound = try UnixSocketDescriptor.bind(name, options: options, context: context)
            let descriptor = bound.descriptor
            createdFile = bound.createdFile
            pathLock = bound.lock
            let pipe = pointer(as: uv_pipe_t.self)
            do throws(UVError) {
                try uvCheck(uv_pipe_init(loop.uvLoop, pipe, 0), "uv_pipe_init")
            } catch {
                Glibc.close(descriptor)
                removeCreatedFile()
                throw error
            }
            didOpen()
            do throws(UVError) {
                try uvCheck(uv_pipe_open(pipe, descriptor), "uv_pipe_open")
            } catch {
                Glibc.close(descriptor)  // libuv did not take it; closing the handle removes the file
                throw error
            }
            try uvCheck(uv_listen(pointer(as: uv_stream_t.self), backlog.value, unixListenerConnectionCallback), "listen on \(name)")
        } catch {
            fail(error)
            return
        }
        callbacks?.onEvent(.listening(path))
    }

    private var place: String { name?.description ?? UnixSocketPath.display(path) }

    fileprivate func accept(status: Int32) {
        if let home = takeNextHome(), home !== self {
            handOff(status: status, to: home)
            return
        }
        let outcome = accepted.accept(
            status: status, from: pointer(as: uv_stream_t.self), place: place, resetRefused: false,
            makeStream: { makeStream() },
            didAccept: { _ in }, refusalDetails: { _ in nil })
        switch outcome {
        // `makeStream` made it a UnixConnection (the outcome is not generic: see `AcceptedStreams.Outcome`).
        case .accepted(let stream): callbacks?.onEvent(.accepted(unsafeDowncast(stream, to: UnixConnection.self)))
        case .refused(_, let open): callbacks?.onEvent(.refused(open: open))
        case nil: break
        }
    }

    /// A new stream for a connection homed here (not opened yet), its activity stamped now (its accept)
    /// when the idle timeout tracks it.
    private func makeStream() -> UnixConnection {
        let stream = UnixConnection(loop: loop, limits: options.limits, originLabel: acceptedOrigin, ipc: options.ipc, path: path)
        stream.noteActivityIfTracked()
        return stream
    }

    /// "accepted by UnixSocket.listen(/run/app.sock)" (with the loop for a group's share), naming the
    /// socket path as the peer. Composed at the first accept (the path is bound by then and does not
    /// change) and shared, as a TCP listener's is: a connection carries no label, peer name or extras of its own.
    private var acceptedOrigin: StreamOrigin {
        if let sharedOrigin { return sharedOrigin }
        let made = StreamOrigin("accepted by \(origin)(\(place))", limits: options.limits, peerName: place,
                                tracksActivity: options.idleTimeout != nil)
        sharedOrigin = made
        return made
    }

    /// The share the next connection goes to (round robin over `homes`), skipping the loops that
    /// have begun shutting down; nil for a server on one loop.
    private func takeNextHome() -> UnixListener? {
        guard !homes.isEmpty else { return nil }
        for _ in homes.indices {
            let home = homes[nextHome]
            nextHome = (nextHome + 1) % homes.count
            // The other loop's state is read without its lock: a hint, checked again on that loop.
            if home === self || !home.loop.shutdownRequested { return home }
        }
        return self
    }

    /// Takes the pending connection, counts it against the limit here (so a refusal is at once,
    /// with no hop), and queues it to `home`'s loop, which opens it there.
    private func handOff(status: Int32, to home: UnixListener) {
        guard uvCheckReporting(status, "accepting a connection on \(place)") else { return }
        let descriptor: Int32
        do {
            descriptor = try PendingConnectionTaker.take(from: pointer(as: uv_stream_t.self), on: loop)
        } catch {
            reportMisuse("a connection could not be accepted on \(place): \(error)")
            return
        }
        guard budget.take() else {
            Glibc.close(descriptor)  // the client reads EOF
            callbacks?.onEvent(.refused(open: budget.open))
            return
        }
        let parcel = HandedOffConnection(descriptor: descriptor, budget: budget)
        // Refused only once that loop has closed: the parcel is closed here, once.
        if !home.loop.enqueue({ home.adopt(parcel) }) { parcel.discard() }
    }

    /// Opens on this loop a connection the group's listening share handed over, and sends it;
    /// closes it instead (the client reads EOF) when this share has ended or its loop was asked
    /// to shut down meanwhile (it would close the connection moments later).
    ///
    /// Loop thread only.
    func adopt(_ parcel: HandedOffConnection) {
        let ended: Bool
        if case .drained = drainState { ended = true } else { ended = callbacks == nil || isDisposed }
        guard !ended, !loop.shutdownRequested, let descriptor = parcel.take() else {
            parcel.discard()
            return
        }
        let stream = makeStream()
        do throws(UVError) {
            try stream.open()
            try uvCheck(uv_pipe_open(stream.pointer(as: uv_pipe_t.self), descriptor), "uv_pipe_open")
        } catch {
            Glibc.close(descriptor)  // libuv did not take it (uv_pipe_open takes it only when it succeeds)
            stream.end(.closed)
            budget.give()
            reportMisuse("a connection handed to loop '\(loop.name)' could not be opened on \(place): \(error)")
            return
        }
        accepted.adopt(stream)
        startIdleTimer()  // a share that only homes connections starts its check with the first
        callbacks?.onEvent(.accepted(stream))
    }

    /// The drain's first step: the listening socket closes and its file goes (a new server may
    /// bind the path while this one drains). A share with no socket has nothing to stop.
    func stopAccepting() {
        homes = []  // it holds this share too: the cycle ends with the accepting
        closeHandle()
        removeCreatedFile()
    }

    private func fail(_ error: any Error) {
        let callbacks = self.callbacks
        shutDown(connectionsEnd: .closed)
        callbacks?.onError(error)
    }

    /// Closes the socket (removing its file) and every connection homed here; a drain under
    /// way ends without its `done`.
    private func shutDown(connectionsEnd reason: StreamConnection.EndReason) {
        callbacks = nil
        abandonDrain()
        idleTimer?.dispose()
        idleTimer = nil
        homes = []
        closeHandle()
        removeCreatedFile()
        accepted.endAll(reason)
    }

    /// Starts the repeating check of `UnixSocketOptions.idleTimeout` (`ListenerIdleCheck`), reading the
    /// loop-time stamps of the connections' last bytes (a stamp is taken at the start of the loop
    /// iteration that moved them, a little early: a 2 ms margin), and counting bytes the kernel holds
    /// unread as activity (`StreamConnection.idleMillisecondsCountingUnreadBytes()`).
    private func startIdleTimer() {
        guard let timeout = options.idleTimeout, idleTimer == nil else { return }
        idleTimer = ListenerIdleCheck.start(
            on: loop, timeout: timeout, option: "UnixSocketOptions.idleTimeout", marginMilliseconds: 2,
            listener: { [weak self] in self.map { ($0.accepted, $0.origin) } },
            idleMilliseconds: { $0.idleMillisecondsCountingUnreadBytes() })
    }

    /// Removes the socket file this listener bound, if the path still names it, then the path's lock. Once.
    private func removeCreatedFile() {
        if let createdFile, let name {
            self.createdFile = nil
            UnixSocketDescriptor.removeSocketFile(name.path, ifStill: createdFile)
        }
        // After the file: until it is gone, another server must not probe or bind the path.
        pathLock?.release()
        pathLock = nil
    }

    override func closeForShutdown() {
        let callbacks = self.callbacks
        shutDown(connectionsEnd: .shutDown)
        callbacks?.onError(EventLoopError.shutDown(loop: loop.name))
    }

    override func didClose() {
        callbacks = nil
    }

    func abandon() {
        shutDown(connectionsEnd: .closed)
    }
}

private let unixListenerConnectionCallback: uv_connection_cb = { server, status in
    guard let data = server?.pointee.data else { return }
    Unmanaged<UnixListener>.fromOpaque(data).takeUnretainedValue().accept(status: status)
}

/// A connection the group's listening share accepted for another loop: its descriptor and its
/// unit of the connection budget, owned here from the accept until that loop opens it, or
/// closed (and the unit given back) exactly once: by `discard()`, or when the last reference
/// goes (a hop that was dropped).
///
/// Thread rule: safe from any thread (one atomic descriptor).
final class HandedOffConnection: Sendable {
    /// The descriptor, or -1 once taken or closed.
    private let descriptor: Atomic<Int32>
    private let budget: ConnectionBudget

    init(descriptor: Int32, budget: ConnectionBudget) {
        self.descriptor = Atomic(descriptor)
        self.budget = budget
    }

    /// The descriptor, now the caller's (with the budget unit); nil once taken or discarded.
    func take() -> Int32? {
        let taken = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        return taken >= 0 ? taken : nil
    }

    /// Closes the descriptor (the client reads EOF) and gives the budget unit back, unless taken.
    func discard() {
        guard let taken = take() else { return }
        Glibc.close(taken)
        budget.give()
    }

    deinit { discard() }
}

/// A `uv_pipe_t` that lives only to take one pending connection from a listener (`uv_accept`)
/// and give up a duplicate of its descriptor, for another loop to open: libuv 1.44 has no
/// public call that hands over an accepted descriptor (see docs/INTERNALS.md, "Serving on a group").
///
/// Loop thread only.
private final class PendingConnectionTaker: LoopHandle {
    override var label: String { "unix socket connection being handed to another loop" }

    /// The pending connection's descriptor (a duplicate, close-on-exec), now the caller's.
    static func take(from listener: UnsafeMutablePointer<uv_stream_t>, on loop: EventLoop) throws(UVError) -> Int32 {
        let taker = PendingConnectionTaker(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE))
        try uvCheck(uv_pipe_init(loop.uvLoop, taker.pointer(as: uv_pipe_t.self), 0), "uv_pipe_init")
        taker.didOpen()
        // Closing the handle closes the descriptor libuv accepted; the duplicate stays open.
        defer { taker.closeHandle() }
        try uvCheck(uv_accept(listener, taker.pointer(as: uv_stream_t.self)), "uv_accept")
        var accepted = uv_os_fd_t()
        try uvCheck(uv_fileno(taker.handle, &accepted), "uv_fileno")
        let duplicate = fcntl(accepted, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { throw UVError(code: -errno, context: "duplicating an accepted connection for another loop") }
        return duplicate
    }
}

extension EventLoop {
    /// Whether `shutdown()` was asked of this loop (or it has shut down): a hint when read off its thread.
    ///
    /// Thread rule: safe from any thread.
    var shutdownRequested: Bool { state.load(ordering: .relaxed).rawValue >= LoopState.closeRequested.rawValue }
}

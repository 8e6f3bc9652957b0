import Synchronization

/// One server subscription's listener on one loop, whatever the transport: it accepts through its
/// socket (`ListeningSocket`, the system calls), keeps the connections (`AcceptedStreams`), holds the
/// connection limit, drains (ListenerDrain.swift) and closes idle connections.
///
/// A server on one loop is one listener. A server on a group (`GroupServer`) is one per loop, its
/// shares: they count against one shared `ConnectionBudget`, and a loop's shutdown ends only its share.
///
/// Thread rule: loop thread only, except `dispose()` and `isDisposed` (safe from any thread) and the
/// immutable `loop`, `socket` and `budget`.
final class Listener<Socket: ListeningSocket>: LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.

    /// Whom the listener tells.
    struct Callbacks {
        /// Told `.listening`, then each `.accepted` and `.refused`, on the loop thread.
        var onEvent: (Socket.Event) -> Void
        /// Told the error that ended the listener.
        var onError: (any Error) -> Void
        /// Set for a group's share: the loop's shutdown ends only this share, and this is called instead of `onError`.
        var onLoopShutdown: (() -> Void)?
    }

    let loop: EventLoop
    /// The system calls (the backend's side of the seam).
    let socket: Socket
    /// The open connections of the whole server (shared by a group's shares), against `maxConnections`.
    let budget: ConnectionBudget
    /// The connections homed here (their owner).
    let accepted: AcceptedStreams
    /// nil once the listener ended (or its socket closed).
    private var callbacks: Callbacks?
    /// Where a drain stands (ListenerDrain.swift).
    var drainState = DrainState.serving
    /// The subscription to a single-loop server's drain requests (a group's are the group server's).
    var drainRequests: (any Disposable)?
    /// The repeating check of the idle timeout, while there is one.
    var idleTimer: (any Disposable)?
    let disposedFlag = Atomic<Bool>(false)

    /// A listener on `socket`'s loop; `budget` is a group's shared one, else a budget of its own.
    init(socket: Socket, budget: ConnectionBudget? = nil, callbacks: Callbacks) {
        loop = socket.loop
        self.socket = socket
        self.budget = budget ?? ConnectionBudget(limit: socket.options.common.maxConnections)
        self.callbacks = callbacks
        accepted = AcceptedStreams(budget: self.budget)
        socket.listener = self
    }

    /// The refusal of options that cannot be served (a timeout that is not positive, a limit below 1,
    /// what the transport refuses, a backlog below 1), or nil: checked before anything is bound.
    static func refusal(of options: Socket.Options, backlog: ListenBacklog, context: String) -> UVError? {
        let name = "\(Socket.Options.self)"
        return ListenerIdleCheck.refusal(of: options.common.idleTimeout, option: "\(name).idleTimeout", context: context)
            ?? ConnectionBudget.refusal(of: options.common.maxConnections, option: "\(name).maxConnections", context: context)
            ?? Socket.transportRefusal(of: options, context: context)
            ?? backlog.refusal(context: context)
    }

    /// Checks the options, then has the socket bind (or adopt) and listen.
    func start() {
        if let refusal = Self.refusal(of: socket.options, backlog: socket.backlog, context: socket.context) {
            fail(refusal)
            return
        }
        // Drained before it started (a drain request came first), or ended: nothing to listen for.
        guard case .serving = drainState, callbacks != nil, !isDisposed else {
            socket.close()
            return
        }
        startIdleTimer()
        socket.start()
    }

    /// Whether it still waits to listen: not disposed, no drain asked.
    var isServing: Bool {
        guard case .serving = drainState else { return false }
        return !isDisposed
    }

    /// Whether a connection handed here now would be kept: the listener has not ended or finished draining.
    var takesConnections: Bool {
        if case .drained = drainState { return false }
        return callbacks != nil && !isDisposed
    }

    // MARK: - What the socket tells

    /// Tells the subscriber `event` (`.listening` from the socket, `.refused` from a hand-off).
    func tell(_ event: Socket.Event) {
        callbacks?.onEvent(event)
    }

    /// A client waits on the socket: accept it, then keep it or turn it away at the limit.
    func acceptPending() {
        let connection: Socket.Event.Connection
        do {
            connection = try socket.accept()
        } catch {
            // That one client is lost; the listener goes on (libuv copes with EMFILE itself).
            reportMisuse("a connection could not be accepted on \(socket.place): \(error)")
            return
        }
        guard budget.take() else {
            callbacks?.onEvent(socket.refuse(connection, open: budget.open))
            return
        }
        accepted.keep(connection)
        callbacks?.onEvent(.accepted(connection))
    }

    /// Keeps a connection another share accepted and counted against the budget (a Unix group's
    /// hand-off), and sends it.
    func keep(handedOff connection: Socket.Event.Connection) {
        accepted.keep(connection)
        startIdleTimer()  // a share that only homes connections starts its check with the first
        callbacks?.onEvent(.accepted(connection))
    }

    /// Ends the listener with `error`: the socket and every connection close.
    func fail(_ error: any Error) {
        let callbacks = self.callbacks
        shutDown(connectionsEnd: .closed)
        callbacks?.onError(error)
    }

    /// The loop shuts down with the socket open: everything closes, and the subscriber (or the group) hears of it.
    func loopDidShutDown() {
        let callbacks = self.callbacks
        shutDown(connectionsEnd: .shutDown)
        if let onLoopShutdown = callbacks?.onLoopShutdown {
            onLoopShutdown()
        } else {
            callbacks?.onError(EventLoopError.shutDown(loop: loop.name))
        }
    }

    /// The socket's handle is released: nothing more is told.
    func socketDidClose() {
        callbacks = nil
    }

    // MARK: - Ending

    /// Closes the socket and every connection; a drain under way ends without its `done`.
    private func shutDown(connectionsEnd reason: StreamConnection.EndReason) {
        callbacks = nil
        abandonDrain()
        idleTimer?.dispose()
        idleTimer = nil
        socket.close()
        accepted.endAll(reason)
    }

    func abandon() {
        shutDown(connectionsEnd: .closed)
    }

    /// Starts the repeating idle check (`ListenerIdleCheck`) when the options ask for one, once.
    private func startIdleTimer() {
        guard let timeout = socket.options.common.idleTimeout, idleTimer == nil else { return }
        idleTimer = ListenerIdleCheck.start(
            on: loop, timeout: timeout, option: "\(Socket.Options.self).idleTimeout",
            marginMilliseconds: Socket.idleMarginMilliseconds,
            listener: { [weak self] in self.map { ($0.accepted, $0.socket.origin) } },
            idleMilliseconds: { Socket.idleMilliseconds(of: $0) })
    }
}

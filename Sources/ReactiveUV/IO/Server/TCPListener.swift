internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The listening `uv_tcp_t` of one server subscription on one loop, and the connections it accepted.
///
/// The one listener path: a server on one loop is one of these (it resolves, binds and
/// listens itself); a server on a group is one of these per loop (a share, adopting a socket
/// `GroupListener` bound for it). Accepting, the limit and ending the connections are the same.
final class TCPListener: LoopHandle, LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.

    /// Where the listening socket comes from.
    enum Source {
        /// Resolve the host, then bind and listen through libuv (a server on one loop).
        case bind(host: String, port: Int)
        /// A socket already bound and listening (a group's share), adopted with `uv_tcp_open`.
        /// The listener owns it from `start()` on, and closes it if it never adopts it.
        case descriptor(Int32, SocketAddress)
    }

    /// Whom the listener tells.
    struct Callbacks {
        /// Told `.listening` (a server on one loop only), then each `.accepted` and `.refused`, on the loop thread.
        var onEvent: (TCPServer.Event) -> Void
        /// Told the error that ended the listener.
        var onError: (any Error) -> Void
        /// Set for a group's share: the loop's shutdown ends only this share, and this is
        /// called instead of `onError`.
        var onLoopShutdown: (() -> Void)?
    }

    private let source: Source
    private let backlog: ListenBacklog
    private let options: TCPOptions
    /// What made the listener, for its label: "TCPServer.listen", or with the loop for a group's share.
    private let origin: String
    /// nil once the listener ended.
    private var callbacks: Callbacks?
    var lookup: (any Disposable)?
    private var address: SocketAddress?
    /// The origin label of the connections it accepts (`acceptedOrigin`), once the first was accepted.
    private var sharedOrigin: StreamOrigin?
    /// The connections it accepted (their owner).
    let accepted: AcceptedStreams
    /// Where a drain stands (see `DrainableListener`, ListenerDrain.swift).
    var drainState = DrainState.serving
    /// The subscription to a single-loop server's drain requests (a group's are the coordinator's).
    var drainRequests: (any Disposable)?
    /// The repeating timer of `TCPOptions.idleTimeout`, while there is one.
    var idleTimer: (any Disposable)?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, source: Source, backlog: ListenBacklog, options: TCPOptions, budget: ConnectionBudget,
         callbacks: Callbacks) {
        self.source = source
        self.backlog = backlog
        self.options = options
        self.callbacks = callbacks
        switch source {
        case .bind: origin = "TCPServer.listen"
        case .descriptor: origin = "TCPServer.listen(on: group) on loop '\(loop.name)'"
        }
        if case .descriptor(_, let bound) = source { address = bound }
        accepted = AcceptedStreams(budget: budget)
        super.init(loop: loop, byteCount: uv_handle_size(UV_TCP))
    }

    override var label: String {
        switch source {
        case .bind(let host, let port): "tcp listener on \(address?.description ?? "\(host):\(port)") from \(origin)"
        case .descriptor(_, let bound): "tcp listener on \(bound) from \(origin)"
        }
    }

    /// Resolves the host (at once when numeric), then binds and listens; or adopts the socket given.
    func start() {
        if let refusal = Self.optionsRefusal(options, origin: origin) ?? backlog.refusal(context: origin) {
            if case .descriptor(let descriptor, _) = source { Glibc.close(descriptor) }
            fail(refusal)
            return
        }
        guard case .serving = drainState else {
            // Drained before it started (a drain request arrived first): nothing to listen for.
            if case .descriptor(let descriptor, _) = source { Glibc.close(descriptor) }
            return
        }
        startIdleTimer()
        switch source {
        case .bind(let host, let port):
            lookup = HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: loop) { [self] result in
                lookup = nil
                guard !isDisposed, case .serving = drainState else { return }
                switch result {
                case .success(let addresses): bindAndListen(addresses[0])
                case .failure(let error): fail(error)
                }
            }
        case .descriptor(let descriptor, let bound):
            guard !isDisposed, callbacks != nil else {
                Glibc.close(descriptor)
                return
            }
            adoptAndListen(descriptor, bound)
        }
    }

    private func bindAndListen(_ address: SocketAddress) {
        guard loop.acceptsNewHandles else {
            fail(EventLoopError.shutDown(loop: loop.name))
            return
        }
        self.address = address
        let tcp = pointer(as: uv_tcp_t.self)
        do {
            try uvCheck(uv_tcp_init(loop.uvLoop, tcp), "uv_tcp_init")
            didOpen()
            // Linux reports EADDRINUSE from uv_listen (libuv defers the bind error), so both are checked.
            do throws(UVError) {
                try uvCheck(address.withSockaddr { uv_tcp_bind(tcp, $0, 0) }, "bind to \(address)")
            } catch {
                throw address.explaining(error)
            }
            try uvCheck(uv_listen(pointer(as: uv_stream_t.self), backlog.value, tcpListenerConnectionCallback),
                        "listen on \(address)")
        } catch {
            fail(error)
            return
        }
        let bound = SocketAddress.read { uv_tcp_getsockname(tcp, $0, $1) } ?? address
        self.address = bound
        callbacks?.onEvent(.listening(bound))
    }

    /// A group's share: the socket is bound and listening (clients may be queued on it already).
    private func adoptAndListen(_ descriptor: Int32, _ bound: SocketAddress) {
        guard loop.acceptsNewHandles else {
            Glibc.close(descriptor)
            closeForShutdown()
            return
        }
        guard case .serving = drainState else {
            Glibc.close(descriptor)
            return
        }
        let tcp = pointer(as: uv_tcp_t.self)
        do {
            try uvCheck(uv_tcp_init(loop.uvLoop, tcp), "uv_tcp_init")
            didOpen()
        } catch {
            Glibc.close(descriptor)
            fail(error)
            return
        }
        do {
            // From here the handle owns the descriptor (uv_close closes it), unless uv_tcp_open fails.
            try uvCheck(uv_tcp_open(tcp, uv_os_sock_t(descriptor)), "uv_tcp_open of the socket for \(bound) on loop '\(loop.name)'")
        } catch {
            Glibc.close(descriptor)
            fail(error)
            return
        }
        do {
            try uvCheck(uv_listen(pointer(as: uv_stream_t.self), backlog.value, tcpListenerConnectionCallback),
                        "listen on \(bound) on loop '\(loop.name)'")
        } catch {
            fail(error)
        }
    }

    fileprivate func accept(status: Int32) {
        let outcome = accepted.accept(
            status: status, from: pointer(as: uv_stream_t.self), place: place, resetRefused: true,
            makeStream: { TCPConnection(loop: loop, transport: .tcp, limits: options.limits, originLabel: acceptedOrigin) },
            didAccept: { $0.didConnectTCP(options: options) },
            refusalDetails: { $0.address(peer: true) })
        switch outcome {
        // `makeStream` made it a TCPConnection (the outcome is not generic: see `AcceptedStreams.Outcome`).
        case .accepted(let stream): callbacks?.onEvent(.accepted(unsafeDowncast(stream, to: TCPConnection.self)))
        case .refused(let peer, let open): callbacks?.onEvent(.refused(peer: peer, open: open))
        case nil: break
        }
    }

    /// Where it listens, for messages: the bound address, or what was asked for before the bind.
    private var place: String { address?.description ?? "\(source)" }

    /// What an accepted connection's label says made it: "accepted by TCPServer.listen(127.0.0.1:80)",
    /// with the loop for a group's share. Composed at the first accept (the address is bound by
    /// then and does not change) and shared by every connection.
    private var acceptedOrigin: StreamOrigin {
        if let sharedOrigin { return sharedOrigin }
        let origin = switch source {
        case .bind: StreamOrigin("accepted by TCPServer.listen(\(place))", limits: options.limits)
        case .descriptor: StreamOrigin("accepted by TCPServer.listen(\(place), on: group) on loop '\(loop.name)'", limits: options.limits)
        }
        sharedOrigin = origin
        return origin
    }

    private func fail(_ error: any Error) {
        let callbacks = self.callbacks
        shutDown(connectionsEnd: .closed)
        callbacks?.onError(error)
    }

    /// Closes the socket and every connection it accepted; a drain under way ends without its `done`.
    private func shutDown(connectionsEnd reason: StreamConnection.EndReason) {
        callbacks = nil
        lookup?.dispose()
        lookup = nil
        abandonDrain()
        idleTimer?.dispose()
        idleTimer = nil
        closeHandle()
        accepted.endAll(reason)
    }

    override func closeForShutdown() {
        let callbacks = self.callbacks
        shutDown(connectionsEnd: .shutDown)
        if let onLoopShutdown = callbacks?.onLoopShutdown {
            onLoopShutdown()
        } else {
            callbacks?.onError(EventLoopError.shutDown(loop: loop.name))
        }
    }

    override func didClose() {
        callbacks = nil
    }

    /// Starts the repeating check of `TCPOptions.idleTimeout` (`ListenerIdleCheck`), reading the
    /// kernel's record of each connection's last data (`TCP_INFO`, in jiffies: a 10 ms margin).
    private func startIdleTimer() {
        guard let timeout = options.idleTimeout else { return }
        idleTimer = ListenerIdleCheck.start(
            on: loop, timeout: timeout, option: "TCPOptions.idleTimeout", marginMilliseconds: 10,
            listener: { [weak self] in self.map { ($0.accepted, $0.origin) } },
            idleMilliseconds: { Self.idleMilliseconds(of: $0).map(UInt64.init) })
    }

    func abandon() {
        shutDown(connectionsEnd: .closed)
    }
}

private let tcpListenerConnectionCallback: uv_connection_cb = { server, status in
    guard let data = server?.pointee.data else { return }
    Unmanaged<TCPListener>.fromOpaque(data).takeUnretainedValue().accept(status: status)
}

internal import CLibUV
import Synchronization

/// TCP servers: a listening socket as a signal of accepted connections.
///
/// Thread rule: safe from any thread.
public enum TCPServer {
    /// What a server signal from `serve` sends.
    ///
    /// Thread rule: safe from any thread.
    public enum Event: Sendable {
        /// The socket is bound and listening at this address (the real port when 0 was asked for). Sent once, first.
        case listening(SocketAddress)
        /// A client connected.
        case accepted(TCPConnection)
        /// A client was turned away (reset at once) because `options.maxConnections` were open.
        case refused(peer: SocketAddress?, open: Int)
    }

    /// Listens on `host:port` and sends each accepted connection.
    ///
    /// The socket is opened when a subscriber arrives, on the subscription's
    /// home loop (or `loop`), and closed when the subscription is disposed;
    /// disposing also closes every connection it accepted that is still
    /// open. Bind errors (`EADDRINUSE`, `EACCES`, an address that is not
    /// local, an unknown host) end the signal with a `UVError`. The signal
    /// never completes on its own.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve ("127.0.0.1", "::", "localhost").
    ///   - port: 0...65535; 0 picks a free port (use `serve` to learn which).
    ///   - backlog: The kernel's queue of connections not yet accepted.
    ///   - options: Socket options and buffer limits for each accepted connection.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of accepted connections.
    ///
    /// Thread rule: safe from any thread.
    public static func listen(
        host: String = "127.0.0.1",
        port: Int,
        backlog: Int32 = 128,
        options: TCPOptions = TCPOptions(),
        on loop: EventLoop? = nil
    ) -> Signal<TCPConnection> {
        listenerSignal("TCPServer.listen", host: host, port: port, backlog: backlog, options: options, on: loop) { event, subscriber in
            // `listen` sends the connections only.
            if case .accepted(let connection) = event { subscriber.sendNext(connection) }
        }.debugNamed("+TCPServer.listen(\(host):\(port))")
    }

    /// Like `listen`, but first sends `.listening(address)` with the bound address, then `.accepted` per client.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name to resolve.
    ///   - port: 0...65535; 0 picks a free port, reported by `.listening`.
    ///   - backlog: The kernel's queue of connections not yet accepted.
    ///   - options: Socket options and buffer limits for each accepted connection.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread.
    public static func serve(
        host: String = "127.0.0.1",
        port: Int,
        backlog: Int32 = 128,
        options: TCPOptions = TCPOptions(),
        on loop: EventLoop? = nil
    ) -> Signal<Event> {
        // The same parameters as `listen` on purpose (two public spellings of one listener,
        // `listenerSignal`): only what each sends differs.
        listenerSignal("TCPServer.serve", host: host, port: port, backlog: backlog, options: options, on: loop) { event, subscriber in
            subscriber.sendNext(event)
        }.debugNamed("+TCPServer.serve(\(host):\(port))")
    }

    /// A signal that opens a `TCPListener` per subscription and hands each of its events to `send`.
    private static func listenerSignal<Value>(
        _ what: String, host: String, port: Int, backlog: Int32, options: TCPOptions, on loop: EventLoop?,
        send: @escaping @Sendable (Event, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: what) { loop in
                let listener = TCPListener(loop: loop, host: host, port: port, backlog: backlog, options: options,
                                           onEvent: { send($0, subscriber) },
                                           onError: { subscriber.sendError($0) })
                listener.start()
                return listener
            }
        }
    }
}

/// The listening `uv_tcp_t` of one server subscription, and the connections it accepted.
final class TCPListener: LoopHandle, LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.
    private let host: String
    private let port: Int
    private let backlog: Int32
    private let options: TCPOptions
    /// Told `.listening`, then each `.accepted` and `.refused`; nil once the listener ended.
    private var onEvent: ((TCPServer.Event) -> Void)?
    private var onError: ((any Error) -> Void)?
    private var lookup: (any Disposable)?
    private var address: SocketAddress?
    /// The connections it accepted (their owner).
    private let accepted: AcceptedStreams
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, host: String, port: Int, backlog: Int32, options: TCPOptions,
         onEvent: @escaping (TCPServer.Event) -> Void,
         onError: @escaping (any Error) -> Void) {
        self.host = host
        self.port = port
        self.backlog = backlog
        self.options = options
        self.onEvent = onEvent
        self.onError = onError
        accepted = AcceptedStreams(maxConnections: options.maxConnections)
        super.init(loop: loop, byteCount: uv_handle_size(UV_TCP))
    }

    override var label: String { "tcp listener on \(address?.description ?? "\(host):\(port)") from TCPServer.listen" }

    /// Resolves the host (at once when numeric), then binds and listens.
    func start() {
        lookup = HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: loop) { [self] result in
            lookup = nil
            guard !isDisposed else { return }
            switch result {
            case .success(let addresses): bindAndListen(addresses[0])
            case .failure(let error): fail(error)
            }
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
            try uvCheck(address.withSockaddr { uv_tcp_bind(tcp, $0, 0) }, "bind to \(address)")
            try uvCheck(uv_listen(pointer(as: uv_stream_t.self), backlog, tcpListenerConnectionCallback),
                        "listen on \(address)")
        } catch {
            fail(error)
            return
        }
        let bound = SocketAddress.read { uv_tcp_getsockname(tcp, $0, $1) } ?? address
        self.address = bound
        onEvent?(.listening(bound))
    }

    fileprivate func accept(status: Int32) {
        let place = address?.description ?? host
        let outcome = accepted.accept(
            status: status, from: pointer(as: uv_stream_t.self), place: place, resetRefused: true,
            makeStream: { StreamHandle(loop: loop, transport: .tcp, limits: options.limits, origin: "accepted by TCPServer.listen(\(place))") },
            details: { $0.didConnectTCP(options: options) })
        switch outcome {
        case .accepted(let stream, let addresses): onEvent?(.accepted(TCPConnection(stream, addresses: addresses)))
        case .refused(let addresses, let open): onEvent?(.refused(peer: addresses.peer, open: open))
        case nil: break
        }
    }

    private func fail(_ error: any Error) {
        let onError = self.onError
        shutDown(connectionsEnd: .closed)
        onError?(error)
    }

    /// Closes the socket and every connection it accepted.
    private func shutDown(connectionsEnd reason: StreamHandle.EndReason) {
        onEvent = nil
        onError = nil
        lookup?.dispose()
        lookup = nil
        close()
        accepted.endAll(reason)
    }

    override func closeForShutdown() {
        let onError = self.onError
        shutDown(connectionsEnd: .shutDown)
        onError?(EventLoopError.shutDown(loop: loop.name))
    }

    override func didClose() {
        onEvent = nil
        onError = nil
    }

    func abandon() {
        shutDown(connectionsEnd: .closed)
    }
}

private let tcpListenerConnectionCallback: uv_connection_cb = { server, status in
    guard let data = server?.pointee.data else { return }
    Unmanaged<TCPListener>.fromOpaque(data).takeUnretainedValue().accept(status: status)
}

internal import CLibUV

/// TCP clients.
///
/// Thread rule: safe from any thread.
public enum TCP {
    /// Connects to `host:port` and sends the connection once it is established.
    ///
    /// A host name is resolved first and its addresses are tried in order. The
    /// connection belongs to this subscription: disposing it closes the
    /// connection, and the signal completes when the connection closes (by
    /// `close()`, a failure, or the peer); it fails with a `UVError` when no
    /// connection could be made: `ECONNREFUSED`, `ETIMEDOUT` (from the system,
    /// or after `timeout`), `ENETUNREACH`, or a resolver error such as
    /// `EAI_NONAME` for an unknown host.
    ///
    /// Because the subscription owns the connection, anything that ends the
    /// subscription after the first value closes it: `try await
    /// TCP.connect(...).first()` (and `take(1)`, the blocking `first(timeout:)`)
    /// hands back a connection that is already closed. In async code use
    /// `TCP.withConnection(host:port:) { connection in ... }`, which keeps it open
    /// while its body runs and closes it gracefully after; or use the connection
    /// inside `for try await connection in TCP.connect(...).values { ... }`.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name.
    ///   - port: 1...65535.
    ///   - options: Socket options and buffer limits for the connection.
    ///   - timeout: Give up connecting after this long (`ETIMEDOUT`); nil leaves it to the system (minutes).
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of one connection; it completes when the connection closes.
    ///
    /// Thread rule: safe from any thread.
    public static func connect(
        host: String,
        port: Int,
        options: TCPOptions = TCPOptions(),
        timeout: Duration? = nil,
        on loop: EventLoop? = nil
    ) -> Signal<TCPConnection> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "TCP.connect") { loop in
                let attempt = TCPConnectAttempt(loop: loop, host: host, port: port, options: options, subscriber: subscriber)
                attempt.start(timeout: timeout)
                return attempt
            }
        }.debugNamed("+TCP.connect(\(host.contains(":") ? "[\(host)]" : host):\(port))")
    }
}

/// One `TCP.connect` subscription: resolve, try each address, then own the connection.
final class TCPConnectAttempt: ConnectionSubscription<TCPConnection>, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings.
    private let host: String
    private let port: Int
    private let options: TCPOptions
    private var lookup: (any Disposable)?
    private var timer: (any Disposable)?
    private var addresses: [SocketAddress] = []
    private var nextAddress = 0
    private var lastError: (any Error)?

    /// "host:port", the host in brackets when it is an IPv6 literal ("[::1]:80", where "::1:80" would name another address).
    private var place: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    init(loop: EventLoop, host: String, port: Int, options: TCPOptions, subscriber: Subscriber<TCPConnection>) {
        self.host = host
        self.port = port
        self.options = options
        super.init(loop: loop, subscriber: subscriber)
    }

    func start(timeout: Duration?) {
        guard (1...65_535).contains(port) else {
            finish(UVError(code: UVError.invalidArgumentCode, message: "port must be in 1...65535, got \(port)",
                           context: "TCP.connect(\(place))"))
            return
        }
        if let refusal = TCPOptions.keepAliveRefusal(options.keepAlive, context: "TCP.connect(\(place))") {
            finish(refusal)
            return
        }
        if let timeout {
            timer = loop.schedule(after: timeout) { [self] in
                guard !sent else { return }
                finish(UVError(code: UV_ETIMEDOUT.rawValue, message: "no connection after \(timeout)",
                               context: "TCP.connect(\(place))"))
            }
        }
        lookup = HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: loop) { [self] result in
            lookup = nil
            switch result {
            case .success(let addresses):
                self.addresses = addresses
                tryNextAddress()
            case .failure(let error):
                finish(error)
            }
        }
    }

    private func tryNextAddress() {
        guard !hasEnded else { return }
        guard nextAddress < addresses.count else {
            finish(lastError ?? UVError(code: UV_ECONNREFUSED.rawValue, context: "TCP.connect(\(place))"))
            return
        }
        guard loop.acceptsNewHandles && loop.acceptsNewRequests else {
            finish(EventLoopError.shutDown(loop: loop.name))
            return
        }
        let address = addresses[nextAddress]
        nextAddress += 1
        let stream = TCPConnection(loop: loop, transport: .tcp, limits: options.limits, origin: "from TCP.connect(\(place))")
        if let network = loop.simulatedNetwork {
            connectSimulated(stream, to: address, on: network)
            return
        }
        let request = ConnectRequest(loop: loop, attempt: self, address: address)
        do {
            try stream.open()
            own(stream)
            try request.start(stream)
        } catch {
            self.stream = nil
            stream.end(.closed)
            lastError = address.explaining(error)
            tryNextAddress()
        }
    }

    fileprivate func connectDidFinish(_ request: ConnectRequest, status: Int32) {
        guard let stream, !hasEnded else { return }
        if status < 0 {
            self.stream = nil
            stream.end(.closed)
            lastError = request.address.explaining(UVError(code: status, context: "connect to \(request.address)"))
            tryNextAddress()
            return
        }
        timer?.dispose()
        timer = nil
        stream.didConnectTCP(options: options)
        send(stream)
    }

    /// `tryNextAddress` on the simulated network: the stream opens now, the answer comes after a round trip.
    private func connectSimulated(_ stream: TCPConnection, to address: SocketAddress, on network: SimulatedNetwork) {
        own(stream)
        network.connect(stream, on: loop, to: address) { [self] status in
            guard self.stream === stream, !hasEnded else { return }
            if status < 0 {
                self.stream = nil
                stream.end(.closed)
                lastError = address.explaining(UVError(code: status, context: "connect to \(address)"))
                tryNextAddress()
                return
            }
            timer?.dispose()
            timer = nil
            send(stream)
        }
    }

    override func release() {
        timer?.dispose()
        timer = nil
        lookup?.dispose()
        lookup = nil
        super.release()
    }
}

/// One `uv_connect_t`.
final class ConnectRequest: LoopRequest {
    // Loop thread only; `attempt` is released once libuv called back.
    private var attempt: TCPConnectAttempt?
    let address: SocketAddress

    init(loop: EventLoop, attempt: TCPConnectAttempt, address: SocketAddress) {
        self.attempt = attempt
        self.address = address
        super.init(loop: loop, type: UV_CONNECT)
    }

    override var label: String { "connect to \(address)" }

    func start(_ stream: StreamConnection) throws(UVError) {
        let request = pointer(as: uv_connect_t.self)
        try start("connect to \(address)") {
            address.withSockaddr { uv_tcp_connect(request, stream.tcp, $0, connectRequestCallback) }
        }
    }

    /// Closing the stream ends a pending connect (ECANCELED); nothing to cancel here.
    override func cancelForShutdown() {}

    fileprivate func finish(status: Int32) {
        didFinish()
        let attempt = self.attempt
        self.attempt = nil
        attempt?.connectDidFinish(self, status: status)
    }
}

private let connectRequestCallback: uv_connect_cb = { request, status in
    guard let data = request?.pointee.data else { return }
    Unmanaged<ConnectRequest>.fromOpaque(data).takeRetainedValue().finish(status: status)
}

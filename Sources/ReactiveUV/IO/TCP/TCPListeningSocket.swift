internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A TCP server's listening `uv_tcp_t` on one loop: libuv's side of a `Listener` (see `ListeningSocket`).
///
/// On one loop it resolves the host, binds and listens itself; as a group's share it adopts a socket
/// the group bound for it with `SO_REUSEPORT` (TCPListeningSocket+Group.swift).
///
/// Thread rule: loop thread only, except the immutable settings.
final class TCPListeningSocket: ListeningHandle<TCPListeningSocket>, ListeningSocket {
    typealias Event = TCPServer.Event

    /// Where the listening socket comes from.
    enum Source {
        /// Resolve the host, then bind and listen through libuv (a server on one loop).
        case bind(host: String, port: Int)
        /// A socket already bound and listening (a group's share), adopted with `uv_tcp_open`.
        case descriptor(Int32, SocketAddress)
    }

    /// `TCP_INFO` counts in jiffies, up to 10 ms each.
    static let idleMarginMilliseconds: UInt64 = 10

    let accepts = true
    private let source: Source
    /// The host lookup, while one is pending.
    private var lookup: (any Disposable)?
    private var address: SocketAddress?
    /// A share's descriptor until `uv_tcp_open` takes it or `close()` closes it; -1 then.
    private var unadopted: Int32 = -1
    /// The origin label of the connections it accepts (`acceptedOrigin`), once the first was accepted.
    private var sharedOrigin: StreamOrigin?

    init(loop: EventLoop, source: Source, backlog: ListenBacklog, options: TCPOptions) {
        self.source = source
        let origin: String
        switch source {
        case .bind:
            origin = "TCPServer.listen"
        case .descriptor(let descriptor, let bound):
            origin = "TCPServer.listen(on: group) on loop '\(loop.name)'"
            unadopted = descriptor
            address = bound
        }
        super.init(loop: loop, byteCount: uv_handle_size(UV_TCP), options: options, backlog: backlog, origin: origin)
    }

    override var label: String {
        switch source {
        case .bind(let host, let port): "tcp listener on \(address?.description ?? "\(host):\(port)") from \(origin)"
        case .descriptor(_, let bound): "tcp listener on \(bound) from \(origin)"
        }
    }

    var context: String { origin }

    var place: String { address?.description ?? "\(source)" }

    /// Resolves the host (at once when numeric), then binds and listens; or adopts the socket given.
    func start() {
        switch source {
        case .bind(let host, let port):
            lookup = HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: loop) { [self] result in
                lookup = nil
                guard let listener, listener.isServing else { return }
                switch result {
                case .success(let addresses): bindAndListen(addresses[0], for: listener)
                case .failure(let error): listener.fail(error)
                }
            }
        case .descriptor(_, let bound):
            adoptAndListen(bound)
        }
    }

    private func bindAndListen(_ address: SocketAddress, for listener: Listener<TCPListeningSocket>) {
        guard loop.acceptsNewHandles else {
            listener.fail(EventLoopError.shutDown(loop: loop.name))
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
            listener.fail(error)
            return
        }
        let bound = SocketAddress.read { uv_tcp_getsockname(tcp, $0, $1) } ?? address
        self.address = bound
        listener.tell(.listening(bound))
    }

    /// A group's share: the socket is bound and listening (clients may be queued on it already).
    private func adoptAndListen(_ bound: SocketAddress) {
        guard let listener else { return close() }
        guard loop.acceptsNewHandles else { return listener.loopDidShutDown() }
        let tcp = pointer(as: uv_tcp_t.self)
        do {
            try uvCheck(uv_tcp_init(loop.uvLoop, tcp), "uv_tcp_init")
            didOpen()
            try uvCheck(uv_tcp_open(tcp, uv_os_sock_t(unadopted)), "uv_tcp_open of the socket for \(bound) on loop '\(loop.name)'")
            // The handle owns the descriptor now: uv_close closes it.
            unadopted = -1
            try uvCheck(uv_listen(pointer(as: uv_stream_t.self), backlog.value, tcpListenerConnectionCallback),
                        "listen on \(bound) on loop '\(loop.name)'")
        } catch {
            listener.fail(error)
        }
    }

    func accept() throws(UVError) -> TCPConnection {
        let connection = try acceptPending(into: TCPConnection(loop: loop, transport: .tcp, limits: options.limits,
                                                                originLabel: acceptedOrigin))
        connection.didConnectTCP(options: options)
        return connection
    }


    func close() {
        lookup?.dispose()
        lookup = nil
        closeHandle()
        if unadopted >= 0 {
            Glibc.close(unadopted)
            unadopted = -1
        }
    }

    /// What an accepted connection's label says made it: "accepted by TCPServer.listen(127.0.0.1:80)",
    /// with the loop for a group's share. Composed at the first accept (the address is bound by
    /// then) and shared by every connection.
    private var acceptedOrigin: StreamOrigin {
        if let sharedOrigin { return sharedOrigin }
        let origin = switch source {
        case .bind: StreamOrigin("accepted by TCPServer.listen(\(place))", limits: options.limits)
        case .descriptor: StreamOrigin("accepted by TCPServer.listen(\(place), on: group) on loop '\(loop.name)'", limits: options.limits)
        }
        sharedOrigin = origin
        return origin
    }

    /// How long since the connection last received or sent a byte, by the kernel's record
    /// (`TCP_INFO`), in milliseconds; nil when it cannot be read.
    static func idleMilliseconds(of connection: StreamConnection) -> UInt64? {
        var descriptor = uv_os_fd_t()
        guard connection.isHandleOpen, uv_fileno(connection.handle, &descriptor) == 0 else { return nil }
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return nil }
        return UInt64(min(info.tcpi_last_data_recv, info.tcpi_last_data_sent))
    }

    static func transportRefusal(of options: TCPOptions, context: String) -> UVError? {
        TCPOptions.keepAliveRefusal(options.keepAlive, context: context)
    }
}

private let tcpListenerConnectionCallback: uv_connection_cb = { server, status in
    guard let data = server?.pointee.data else { return }
    let socket = Unmanaged<TCPListeningSocket>.fromOpaque(data).takeUnretainedValue()
    guard uvCheckReporting(status, "accepting a connection on \(socket.place)") else { return }
    socket.listener?.acceptPending()
}

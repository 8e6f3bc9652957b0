internal import CLibUV

/// The two ends of a TCP connection, read once it is connected or accepted.
struct TCPAddresses {
    /// This end, or nil if it could not be read.
    var local: SocketAddress?
    /// The other end, or nil if it could not be read (a peer that reset at once).
    var peer: SocketAddress?
}

/// What only a TCP stream has: addresses and TCP's socket options. The rest is the stream core (`StreamHandle`).
extension StreamHandle {
    var tcp: UnsafeMutablePointer<uv_tcp_t> { pointer(as: uv_tcp_t.self) }

    /// Reads the addresses and applies the options, once connected or accepted.
    func didConnectTCP(options: TCPOptions) -> TCPAddresses {
        let addresses = TCPAddresses(local: SocketAddress.read { uv_tcp_getsockname(tcp, $0, $1) },
                                     peer: SocketAddress.read { uv_tcp_getpeername(tcp, $0, $1) })
        if let peer = addresses.peer { peerDescription = peer.description }
        // Nobody can receive an error here; the connection still works without the option.
        if options.noDelay { uvCheckReporting(uv_tcp_nodelay(tcp, 1), "uv_tcp_nodelay on \(peerDescription)") }
        if let delay = options.keepAlive {
            uvCheckReporting(uv_tcp_keepalive(tcp, 1, keepAliveSeconds(delay)), "uv_tcp_keepalive on \(peerDescription)")
        }
        return addresses
    }

    func setNoDelay(_ enabled: Bool) throws(UVError) {
        assertInEventLoop()
        guard isOpen else { throw closedError("setNoDelay") }
        try uvCheck(uv_tcp_nodelay(tcp, enabled ? 1 : 0), "uv_tcp_nodelay")
    }

    func setKeepAlive(_ delay: Duration?) throws(UVError) {
        assertInEventLoop()
        guard isOpen else { throw closedError("setKeepAlive") }
        try uvCheck(uv_tcp_keepalive(tcp, delay == nil ? 0 : 1, delay.map(keepAliveSeconds) ?? 0), "uv_tcp_keepalive")
    }

    private func keepAliveSeconds(_ delay: Duration) -> UInt32 {
        UInt32(clamping: max(1, delay.components.seconds))
    }
}

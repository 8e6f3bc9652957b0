/// One open TCP connection, handed out by `TCPServer.listen` or `TCP.connect`.
///
/// Reading, writing, half-close, `close()` and `reset()` are the stream
/// core's, shared with `UnixConnection` (see `StreamConnection`, which
/// describes them); a TCP connection adds its addresses and TCP's socket
/// options (`setNoDelay`, `setKeepAlive`). `reset()` sends RST.
///
/// Thread rule: every method is safe from any thread; work is done on the
/// connection's loop (calls made there run at once, others are queued there
/// in order), except `setNoDelay` and `setKeepAlive` (loop thread only).
public final class TCPConnection: StreamConnection, @unchecked Sendable {
    // No state of its own: the stream core's is confined to its loop thread, and its address cache has its own lock.

    /// The address of this end, or nil if it could not be read.
    ///
    /// Read from the socket the first time it is asked for (a server accepting a connection asks
    /// the kernel nothing more), then kept: every later read gives the same answer. Asked for the
    /// first time after the connection closed, it is nil (the socket is gone); ask while the
    /// connection is open (in the `.accepted` handler, or before `close()`) to log it afterwards.
    ///
    /// Thread rule: safe from any thread; never waits for the loop (the first read makes one system call).
    public var localAddress: SocketAddress? { address(peer: false) }

    /// The address of the other end, or nil if it could not be read.
    ///
    /// Read on first use and kept, as `localAddress`. A peer that reset the connection is still
    /// named while the socket is open, and the error that ends the connection (`ECONNRESET` on
    /// `bytes`) names it in its message, which reads and keeps it before the socket closes: the
    /// property then answers even after that end. Asked for the first time after the connection
    /// closed otherwise (`close()` finished, `reset()`, the server's disposal, the loop's
    /// shutdown), it is nil.
    ///
    /// Thread rule: safe from any thread; never waits for the loop (the first read makes one or two system calls).
    public var peerAddress: SocketAddress? { address(peer: true) }

    /// `"tcp 127.0.0.1:5000 -> 127.0.0.1:41234"`.
    ///
    /// Thread rule: safe from any thread.
    public override var description: String {
        "tcp \(localAddress?.description ?? "?") -> \(tcpPeerText ?? "?")"
    }

    /// Turns `TCP_NODELAY` on or off (it starts as `TCPOptions.noDelay` says).
    ///
    /// - Parameter enabled: Whether small writes go out at once.
    /// - Throws: `UVError` when the connection is closed, the call fails, or it is made off the loop thread (`EINVAL`).
    ///
    /// Thread rule: loop thread only.
    public func setNoDelay(_ enabled: Bool) throws(UVError) {
        try checkOnLoop("setNoDelay")
        try applyNoDelay(enabled)
    }

    /// Turns TCP keep-alive on with an initial delay (whole seconds, at least 1), or off with nil.
    ///
    /// - Parameter delay: Idle time before the first probe, or nil to turn keep-alive off.
    /// - Throws: `UVError` when the connection is closed, the call fails, the delay is past
    ///   32,767 seconds (`EINVAL` naming Linux's limit; keep-alive is left as it was), or it is
    ///   made off the loop thread (`EINVAL`).
    ///
    /// Thread rule: loop thread only.
    public func setKeepAlive(_ delay: Duration?) throws(UVError) {
        try checkOnLoop("setKeepAlive")
        try applyKeepAlive(delay)
    }

    private func checkOnLoop(_ operation: String) throws(UVError) {
        guard loop.inEventLoop else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "must be called on the connection's loop thread ('\(loop.name)')",
                          context: "TCPConnection.\(operation)")
        }
    }
}

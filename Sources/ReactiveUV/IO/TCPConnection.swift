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
    // The addresses are immutable; the stream's state is confined to its loop thread.

    /// The address of this end, or nil if it could not be read.
    ///
    /// Thread rule: safe from any thread.
    public let localAddress: SocketAddress?
    /// The address of the other end, or nil if it could not be read (a peer that reset at once).
    ///
    /// Thread rule: safe from any thread.
    public let peerAddress: SocketAddress?

    init(_ stream: StreamHandle, addresses: TCPAddresses) {
        localAddress = addresses.local
        peerAddress = addresses.peer
        super.init(stream)
    }

    /// `"tcp 127.0.0.1:5000 -> 127.0.0.1:41234"`.
    ///
    /// Thread rule: safe from any thread.
    public override var description: String {
        "tcp \(localAddress?.description ?? "?") -> \(peerAddress?.description ?? "?")"
    }

    /// Turns `TCP_NODELAY` on or off (it starts as `TCPOptions.noDelay` says).
    ///
    /// - Parameter enabled: Whether small writes go out at once.
    /// - Throws: `UVError` when the connection is closed, the call fails, or it is made off the loop thread (`EINVAL`).
    ///
    /// Thread rule: loop thread only.
    public func setNoDelay(_ enabled: Bool) throws(UVError) {
        try checkOnLoop("setNoDelay")
        try stream.setNoDelay(enabled)
    }

    /// Turns TCP keep-alive on with an initial delay (whole seconds, at least 1), or off with nil.
    ///
    /// - Parameter delay: Idle time before the first probe, or nil to turn keep-alive off.
    /// - Throws: `UVError` when the connection is closed, the call fails, or it is made off the loop thread (`EINVAL`).
    ///
    /// Thread rule: loop thread only.
    public func setKeepAlive(_ delay: Duration?) throws(UVError) {
        try checkOnLoop("setKeepAlive")
        try stream.setKeepAlive(delay)
    }

    private func checkOnLoop(_ operation: String) throws(UVError) {
        guard stream.loop.inEventLoop else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "must be called on the connection's loop thread ('\(stream.loop.name)')",
                          context: "TCPConnection.\(operation)")
        }
    }
}

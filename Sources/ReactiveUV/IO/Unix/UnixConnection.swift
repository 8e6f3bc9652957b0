/// One open Unix-domain socket connection, handed out by `UnixSocket.listen`/`serve` or `UnixSocket.connect`.
///
/// Reading, writing, half-close, `close()` and `reset()` are the stream
/// core's, shared with `TCPConnection` (see `StreamConnection`, which
/// describes them): code written against `StreamConnection` serves both. A
/// Unix connection has no addresses or TCP options; it knows the socket
/// `path` it went through. `reset()` closes at once (Unix sockets have no
/// RST: the peer reads EOF, or `ECONNRESET` if it had sent bytes nobody read).
///
/// Thread rule: every method is safe from any thread; work is done on the
/// connection's loop (calls made there run at once, others are queued there in order).
public final class UnixConnection: StreamConnection, @unchecked Sendable {
    // `path` is written only before the connection is handed out (a received socket's once it is
    // accepted), then immutable; the stream core's state is confined to its loop thread. Stored, not
    // derived from the stream's names: those are display forms (an abstract name as `@name`), and
    // a received socket's is read from it when it arrives.

    /// The socket's name: the server's path (or `"\0name"` for an abstract name), on both ends;
    /// empty for an unnamed socket (an end of `UnixSocket.pair()`, or a passed socket nobody bound).
    ///
    /// Thread rule: safe from any thread.
    public internal(set) var path: String

    /// A connection on `path` (empty when it is read once the socket is accepted), not opened yet.
    init(loop: EventLoop, limits: StreamBufferLimits, originLabel: StreamOrigin, ipc: Bool, path: String) {
        self.path = path
        super.init(loop: loop, transport: .pipe, limits: limits, originLabel: originLabel, ipc: ipc)
    }

    /// `"unix /run/app.sock"` (an abstract name is shown as `"unix @name"`).
    ///
    /// Thread rule: safe from any thread.
    public override var description: String { "unix \(peerDescription)" }
}

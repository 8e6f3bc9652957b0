internal import CLibUV

/// libuv's side of the seam, as both libuv listening sockets (`TCPListeningSocket`,
/// `UnixListeningSocket`) have it: the handle that owns the socket, what the server was given, the
/// listener it tells, and taking a pending client into a connection.
///
/// Thread rule: loop thread only, except the immutable settings.
class ListeningHandle<Socket: ListeningSocket>: LoopHandle {
    /// The listener this socket serves (weak: the listener owns the socket).
    weak var listener: Listener<Socket>?
    /// The options the server was given.
    let options: Socket.Options
    /// The kernel's queue of clients not yet accepted.
    let backlog: ListenBacklog
    /// What made the listener, for labels.
    let origin: String

    init(loop: EventLoop, byteCount: Int, options: Socket.Options, backlog: ListenBacklog, origin: String) {
        self.options = options
        self.backlog = backlog
        self.origin = origin
        super.init(loop: loop, byteCount: byteCount)
    }

    /// Takes the pending client into `connection` (made, not yet opened), or closes it and throws.
    func acceptPending<Connection: StreamConnection>(into connection: Connection) throws(UVError) -> Connection {
        do throws(UVError) {
            try connection.open()
            try uvCheck(uv_accept(pointer(as: uv_stream_t.self), connection.uvStream), "uv_accept")
        } catch {
            connection.end(.closed)
            throw error
        }
        return connection
    }

    /// The loop shuts down with the socket open: the listener ends (and closes it).
    override func closeForShutdown() {
        if let listener { listener.loopDidShutDown() } else { closeHandle() }
    }

    override func didClose() {
        listener?.socketDidClose()
    }
}

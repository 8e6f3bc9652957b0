internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A Unix socket server's listening `uv_pipe_t` on one loop: libuv's side of a `Listener` (see `ListeningSocket`).
///
/// On one loop it binds the path (its lock file, a stale file removed when asked, the permissions)
/// and listens. On a group only the first loop's socket listens, and hands each client to the next
/// share in turn (UnixListeningSocket+Group.swift); the others never open a socket, and open the
/// connections handed to them.
///
/// Thread rule: loop thread only, except the immutable settings.
final class UnixListeningSocket: ListeningHandle<UnixListeningSocket>, ListeningSocket {
    typealias Event = UnixSocket.Event

    /// A stamp is the loop time at the start of the iteration that moved the bytes, a little early.
    static let idleMarginMilliseconds: UInt64 = 2

    let context: String
    /// Whether it binds and listens (else a group's share that only homes connections).
    let accepts: Bool
    let path: String
    private(set) var name: UnixSocketPath?
    /// The socket file this socket created, removed when it closes (if it is still that file).
    private var createdFile: FileIdentity?
    /// The path's lock, held from before the bind until the socket file is removed (see `UnixSocketLock`).
    private var pathLock: UnixSocketLock?
    /// What its accepted connections say made them, with the socket path as their peer: composed at
    /// the first accept and shared by every connection homed here (`acceptedOrigin`).
    private var sharedOrigin: StreamOrigin?
    /// A group's accepting share: every share (itself included), which take the clients in turn.
    /// Empty on one loop. Set before `start()`.
    var homes: [Listener<UnixListeningSocket>] = []
    /// The index in `homes` of the share the next client goes to.
    var nextHome = 0

    /// - Parameters:
    ///   - what: The call that made the server ("UnixSocket.serve"), for errors.
    ///   - inGroup: Whether it is a group's share (its labels name the loop).
    init(loop: EventLoop, accepts: Bool, path: String, what: String, backlog: ListenBacklog, options: UnixSocketOptions,
         inGroup: Bool) {
        self.accepts = accepts
        self.path = path
        context = "\(what)(\(UnixSocketPath.display(path)))"
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE), options: options, backlog: backlog,
                   origin: inGroup ? "UnixSocket.listen(on: group) on loop '\(loop.name)'" : "UnixSocket.listen")
    }

    override var label: String { "unix socket listener on \(place) from \(origin)" }

    var place: String { name?.description ?? UnixSocketPath.display(path) }

    /// Checks the path, binds (removing a stale file if asked), sets the permissions, and listens;
    /// then says `.listening`.
    func start() {
        guard accepts, let listener else { return }
        do throws(UVError) {
            let name = try UnixSocketPath(path, context: context)
            self.name = name
            let bound = try UnixSocketDescriptor.bind(name, options: options, context: context)
            let descriptor = bound.descriptor
            createdFile = bound.createdFile
            pathLock = bound.lock
            let pipe = pointer(as: uv_pipe_t.self)
            do throws(UVError) {
                try uvCheck(uv_pipe_init(loop.uvLoop, pipe, 0), "uv_pipe_init")
            } catch {
                Glibc.close(descriptor)
                removeCreatedFile()
                throw error
            }
            didOpen()
            do throws(UVError) {
                try uvCheck(uv_pipe_open(pipe, descriptor), "uv_pipe_open")
            } catch {
                Glibc.close(descriptor)  // libuv did not take it; closing the handle removes the file
                throw error
            }
            try uvCheck(uv_listen(pointer(as: uv_stream_t.self), backlog.value, unixListenerConnectionCallback), "listen on \(name)")
        } catch {
            listener.fail(error)
            return
        }
        listener.tell(.listening(path))
    }

    func accept() throws(UVError) -> UnixConnection {
        try acceptPending(into: makeConnection())
    }

    /// A new connection homed here (not opened yet), its activity stamped now (its accept) when the
    /// idle timeout tracks it.
    func makeConnection() -> UnixConnection {
        let connection = UnixConnection(loop: loop, limits: options.limits, originLabel: acceptedOrigin, ipc: options.ipc, path: path)
        connection.noteActivityIfTracked()
        return connection
    }


    /// Closes the socket and removes its file: a new server may bind the path while this one drains.
    func close() {
        homes = []  // it holds this share too: the cycle ends with the accepting
        closeHandle()
        removeCreatedFile()
    }

    /// "accepted by UnixSocket.listen(/run/app.sock)" (with the loop for a group's share), naming the
    /// socket path as the peer. Composed at the first accept (the path is bound by then) and shared,
    /// so a connection carries no label, peer name or extras of its own.
    private var acceptedOrigin: StreamOrigin {
        if let sharedOrigin { return sharedOrigin }
        let made = StreamOrigin("accepted by \(origin)(\(place))", limits: options.limits, peerName: place,
                                tracksActivity: options.idleTimeout != nil)
        sharedOrigin = made
        return made
    }

    /// Removes the socket file this socket bound, if the path still names it, then the path's lock. Once.
    private func removeCreatedFile() {
        if let createdFile, let name {
            self.createdFile = nil
            UnixSocketDescriptor.removeSocketFile(name.path, ifStill: createdFile)
        }
        // After the file: until it is gone, another server must not probe or bind the path.
        pathLock?.release()
        pathLock = nil
    }

    /// How long the connection moved no byte, by its loop-time stamps, counting bytes the kernel holds
    /// unread as activity: the kernel keeps no record of a Unix socket's last data, as `TCP_INFO` does.
    static func idleMilliseconds(of connection: StreamConnection) -> UInt64? {
        connection.idleMillisecondsCountingUnreadBytes()
    }

    static func transportRefusal(of options: UnixSocketOptions, context: String) -> UVError? { nil }
}

private let unixListenerConnectionCallback: uv_connection_cb = { server, status in
    guard let data = server?.pointee.data else { return }
    let socket = Unmanaged<UnixListeningSocket>.fromOpaque(data).takeUnretainedValue()
    guard uvCheckReporting(status, "accepting a connection on \(socket.place)") else { return }
    socket.clientWaits()
}

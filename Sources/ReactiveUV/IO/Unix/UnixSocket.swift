internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Unix-domain sockets (`AF_UNIX` stream sockets on a path, or on a Linux abstract name): servers and clients.
///
/// A name is a file path ("/run/app.sock", at most 107 bytes: never
/// truncated) or, on Linux, an abstract name: a leading NUL (`"\0app"`), no
/// file, gone when its socket closes. Connections are `UnixConnection`s,
/// which share the stream core (reading, writing, flow control, close) with
/// `TCPConnection`.
///
/// Thread rule: safe from any thread.
public enum UnixSocket {
    /// What a server signal from `serve` sends.
    ///
    /// Thread rule: safe from any thread.
    public enum Event: Sendable {
        /// The socket is bound and listening on this path (as given). Sent once, first.
        case listening(String)
        /// A client connected.
        case accepted(UnixConnection)
        /// A client was turned away (closed at once) because `options.maxConnections` were open.
        case refused(open: Int)
        /// A drain began (see `DrainRequest`): the socket is closed and its file removed, so no
        /// client is accepted any more, and the server waits for these `open` connections to
        /// close. Sent once; each connection hears it too (`StreamConnection.draining`): finish
        /// its current work and `close()` it (or `markIdle()` it, when the drain closes idle
        /// connections). When the last one has closed (or the drain's deadline closed the rest)
        /// the signal completes.
        case draining(open: Int)
    }

    /// What a server's `drain` signal asks: to quiesce gracefully, or to stop now (the same type as `TCPServer.DrainRequest`).
    ///
    /// `.graceful(timeout:closingIdle:)` (the first one counts): the listening socket closes at
    /// once and its file is removed (a client connecting from then on gets `ENOENT`, or
    /// `ECONNREFUSED` on an abstract name; a new server may bind the path while this one
    /// drains), `serve` sends `.draining(open:)`, and each connection already accepted hears it
    /// (`StreamConnection.draining`). With `closingIdle` the idle ones close at once, gracefully
    /// (the peer reads what was queued, then EOF), and each other one as soon as its handler
    /// marks it idle (`StreamConnection.markIdle()`); without it they carry on untouched. When
    /// the last one has closed the server signal completes; at `timeout` the ones still open
    /// are closed at once, their unsent data dropped (Unix sockets have no RST: the peer reads
    /// EOF, or `ECONNRESET` if it had sent bytes nobody read), and the signal completes.
    /// `.force`: the same, closing the open connections now (also during a graceful drain).
    /// The drain signal ending changes nothing; disposing the server during a drain closes
    /// everything at once, and the signal does not complete.
    ///
    /// Thread rule: a value type; safe from any thread.
    public typealias DrainRequest = TCPServer.DrainRequest

    /// Listens on `path` and sends each accepted connection.
    ///
    /// The socket is made when a subscriber arrives, on the subscription's
    /// home loop (or `loop`), and closed when the subscription is disposed;
    /// disposing also closes every connection it accepted that is still
    /// open, and removes the socket file the server created (not a file
    /// another process has put there since). Errors end the signal with a
    /// `UVError`: `EADDRINUSE` when the path exists (see
    /// `UnixSocketOptions.removeStaleSocketFile`), `ENOENT` for a missing
    /// directory, `EACCES`, `ENAMETOOLONG` past 107 bytes, `EINVAL` for an
    /// empty path. The signal never completes on its own: only a drain (the
    /// `drain` parameter) completes it.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted: nil (the default) for the system's
    ///     maximum (`net.core.somaxconn`, read when the server starts), as a client finding the queue
    ///     full is refused at once (`EAGAIN`); at least 1, else `EINVAL`.
    ///   - options: Buffer limits, the connection limit, stale-file removal and the file's permissions.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`); when the drain finishes the signal completes.
    /// - Returns: A signal of accepted connections.
    ///
    /// Thread rule: safe from any thread.
    public static func listen(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                              on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil) -> Signal<UnixConnection> {
        onLoop("UnixSocket.listen", path: path, backlog: backlog, options: options, on: loop, drain: drain,
               send: Event.sendConnection).debugNamed("+UnixSocket.listen(\(UnixSocketPath.display(path)))")
    }

    /// Like `listen`, but first sends `.listening(path)`, then `.accepted` per client and `.refused` per client turned
    /// away; after a drain request, `.draining(open:)`, then it completes once the connections have closed.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted: nil (the default) for the system's
    ///     maximum (`net.core.somaxconn`, read when the server starts), as a client finding the queue
    ///     full is refused at once (`EAGAIN`); at least 1, else `EINVAL`.
    ///   - options: Buffer limits, the connection limit, stale-file removal and the file's permissions.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///   - drain: Requests to quiesce (see `DrainRequest`): `.draining` is sent, then the signal completes.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread.
    public static func serve(path: String, backlog: Int32? = nil, options: UnixSocketOptions = UnixSocketOptions(),
                             on loop: EventLoop? = nil, drain: Signal<DrainRequest>? = nil) -> Signal<Event> {
        onLoop("UnixSocket.serve", path: path, backlog: backlog, options: options, on: loop, drain: drain,
               send: Event.sendEvent).debugNamed("+UnixSocket.serve(\(UnixSocketPath.display(path)))")
    }

    /// Connects to the server on `path` and sends the connection.
    ///
    /// The connection belongs to this subscription: disposing it closes the
    /// connection, and the signal completes when the connection closes. It
    /// fails with a `UVError` when no connection could be made: `ENOENT` (no
    /// socket there), `ECONNREFUSED` (nobody listens: a stale socket file),
    /// `EACCES`, `EAGAIN` (the server's backlog is full), `ENAMETOOLONG`,
    /// `EINVAL`. A Unix socket connects at once, so there is no timeout.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - options: Buffer limits for the connection.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of one connection; it completes when the connection closes.
    ///
    /// Thread rule: safe from any thread.
    public static func connect(
        path: String,
        options: UnixSocketOptions = UnixSocketOptions(),
        on loop: EventLoop? = nil
    ) -> Signal<UnixConnection> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "UnixSocket.connect") { loop in
                let context = "UnixSocket.connect(\(UnixSocketPath.display(path)))"
                let attempt = UnixConnectAttempt(loop: loop, path: path, context: context, options: options, subscriber: subscriber)
                if let network = loop.simulatedNetwork {
                    attempt.startSimulated(on: network)
                    return attempt
                }
                attempt.start { () throws(UVError) in
                    let name = try UnixSocketPath(path, context: context)
                    return (try UnixSocketDescriptor.connect(name, context: context), name.description)
                }
                return attempt
            }
        }.debugNamed("+UnixSocket.connect(\(UnixSocketPath.display(path)))")
    }

    /// A server on one loop: a `Listener` over a `UnixListeningSocket` per subscription.
    private static func onLoop<Value>(
        _ what: String, path: String, backlog: Int32?, options: UnixSocketOptions, on loop: EventLoop?,
        drain: Signal<DrainRequest>?, send: @escaping @Sendable (Event, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        ServerSignal.onLoop(what, on: loop, drain: drain, send: send, socket: { loop in
            UnixListeningSocket(loop: loop, accepts: true, path: path, what: what, backlog: ListenBacklog(backlog), options: options,
                                inGroup: false)
        }, simulatedSocket: { loop in
            // A simulated loop always has its simulation's network.
            SimulatedUnixListeningSocket(loop: loop, path: path, what: what, backlog: ListenBacklog(backlog), options: options,
                                         network: loop.simulatedNetwork!)
        })
    }
}

extension UnixSocket.Event: ServerEvent {
    /// The connection of `.accepted`; nil for every other event.
    var acceptedConnection: UnixConnection? {
        if case .accepted(let connection) = self { connection } else { nil }
    }

    static func refusing(_ connection: UnixConnection, open: Int) -> UnixSocket.Event {
        connection.end(.closed)  // a Unix socket has no reset: the client reads EOF
        return .refused(open: open)
    }
}

/// One `UnixSocket.connect` or `UnixSocket.open` subscription: get the socket, then own the connection.
final class UnixConnectAttempt: ConnectionSubscription<UnixConnection>, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings.
    private let path: String
    private let context: String
    private let options: UnixSocketOptions

    init(loop: EventLoop, path: String, context: String, options: UnixSocketOptions, subscriber: Subscriber<UnixConnection>) {
        self.path = path
        self.context = context
        self.options = options
        super.init(loop: loop, subscriber: subscriber)
    }

    /// Gets the socket from `socket` (a connect is at once: a Unix socket's does not wait for the
    /// server), hands it to libuv and sends the connection.
    ///
    /// - Parameter socket: Returns a connected descriptor (now this attempt's) and its name for messages.
    func start(_ socket: () throws(UVError) -> (descriptor: Int32, name: String)) {
        let stream: UnixConnection
        do throws(UVError) {
            let (descriptor, name) = try socket()
            stream = UnixConnection(loop: loop, limits: options.limits, originLabel: StreamOrigin("from \(context)", limits: options.limits),
                                    ipc: options.ipc, path: path)
            stream.peerDescription = name
            do throws(UVError) {
                try stream.open()
                try uvCheck(uv_pipe_open(stream.pointer(as: uv_pipe_t.self), descriptor), "uv_pipe_open")
            } catch {
                Glibc.close(descriptor)  // libuv did not take it
                stream.end(.closed)
                throw error
            }
        } catch {
            finish(error)
            return
        }
        own(stream)
        send(stream)
    }

    /// `start` on the simulated network: connected at once, the server told after the latency.
    func startSimulated(on network: SimulatedNetwork) {
        do throws(UVError) {
            _ = try UnixSocketPath(path, context: context)
        } catch {
            return finish(error)
        }
        let stream = UnixConnection(loop: loop, limits: options.limits, originLabel: StreamOrigin("from \(context)", limits: options.limits),
                                    ipc: options.ipc, path: path)
        stream.peerDescription = UnixSocketPath.display(path)
        if let error = network.connectUnix(stream, on: loop, to: path, context: context) {
            return finish(error)
        }
        own(stream)
        send(stream)
    }
}

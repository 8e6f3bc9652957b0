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
    }

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
    /// empty path. The signal never completes on its own.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted.
    ///   - options: Buffer limits, the connection limit, stale-file removal and the file's permissions.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of accepted connections.
    ///
    /// Thread rule: safe from any thread.
    public static func listen(
        path: String,
        backlog: Int32 = 128,
        options: UnixSocketOptions = UnixSocketOptions(),
        on loop: EventLoop? = nil
    ) -> Signal<UnixConnection> {
        listenerSignal("UnixSocket.listen", path: path, backlog: backlog, options: options, on: loop) { event, subscriber in
            if case .accepted(let connection) = event { subscriber.sendNext(connection) }
        }.debugNamed("+UnixSocket.listen(\(path))")
    }

    /// Like `listen`, but first sends `.listening(path)`, then `.accepted` per client and `.refused` per client turned away.
    ///
    /// - Parameters:
    ///   - path: A file path, or `"\0name"` for a Linux abstract name.
    ///   - backlog: The kernel's queue of connections not yet accepted.
    ///   - options: Buffer limits, the connection limit, stale-file removal and the file's permissions.
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    /// - Returns: A signal of server events.
    ///
    /// Thread rule: safe from any thread.
    public static func serve(
        path: String,
        backlog: Int32 = 128,
        options: UnixSocketOptions = UnixSocketOptions(),
        on loop: EventLoop? = nil
    ) -> Signal<Event> {
        listenerSignal("UnixSocket.serve", path: path, backlog: backlog, options: options, on: loop) { event, subscriber in
            subscriber.sendNext(event)
        }.debugNamed("+UnixSocket.serve(\(path))")
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
                let context = "UnixSocket.connect(\(path))"
                let attempt = UnixConnectAttempt(loop: loop, path: path, context: context, options: options, subscriber: subscriber)
                attempt.start { () throws(UVError) in
                    let name = try UnixSocketPath(path, context: context)
                    return (try UnixSocketDescriptor.connect(name, context: context), name.description)
                }
                return attempt
            }
        }.debugNamed("+UnixSocket.connect(\(path))")
    }

    /// A signal that opens a `UnixListener` per subscription and hands each of its events to `send`.
    private static func listenerSignal<Value>(
        _ what: String, path: String, backlog: Int32, options: UnixSocketOptions, on loop: EventLoop?,
        send: @escaping @Sendable (Event, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: what) { loop in
                let listener = UnixListener(loop: loop, path: path, backlog: backlog, options: options,
                                            onEvent: { send($0, subscriber) },
                                            onError: { subscriber.sendError($0) })
                listener.start(what)
                return listener
            }
        }
    }
}

/// The listening `uv_pipe_t` of one Unix socket server subscription, and the connections it accepted.
final class UnixListener: LoopHandle, LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.
    private let path: String
    private let backlog: Int32
    private let options: UnixSocketOptions
    private var onEvent: ((UnixSocket.Event) -> Void)?
    private var onError: ((any Error) -> Void)?
    private var name: UnixSocketPath?
    /// The socket file this listener created, removed when it closes (if it is still that file).
    private var createdFile: FileIdentity?
    /// The connections it accepted (their owner).
    private let accepted: AcceptedStreams
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, path: String, backlog: Int32, options: UnixSocketOptions,
         onEvent: @escaping (UnixSocket.Event) -> Void,
         onError: @escaping (any Error) -> Void) {
        self.path = path
        self.backlog = backlog
        self.options = options
        self.onEvent = onEvent
        self.onError = onError
        accepted = AcceptedStreams(budget: ConnectionBudget(limit: options.maxConnections))
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE))
    }

    override var label: String { "unix socket listener on \(name?.description ?? path) from UnixSocket.listen" }

    /// Checks the path, binds (removing a stale file if asked), sets the permissions, and listens.
    func start(_ what: String) {
        let context = "\(what)(\(path))"
        do throws(UVError) {
            let name = try UnixSocketPath(path, context: context)
            self.name = name
            let (descriptor, identity) = try UnixSocketDescriptor.bind(name, options: options, context: context)
            createdFile = identity
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
            try uvCheck(uv_listen(pointer(as: uv_stream_t.self), backlog, unixListenerConnectionCallback), "listen on \(name)")
        } catch {
            fail(error)
            return
        }
        onEvent?(.listening(path))
    }

    fileprivate func accept(status: Int32) {
        let place = name?.description ?? path
        let outcome = accepted.accept(
            status: status, from: pointer(as: uv_stream_t.self), place: place, resetRefused: false,
            makeStream: {
                let stream = StreamHandle(loop: loop, transport: .pipe, limits: options.limits,
                                          origin: "accepted by UnixSocket.listen(\(place))", ipc: options.ipc)
                stream.peerDescription = place
                return stream
            },
            didAccept: { _ in }, refusalDetails: { _ in nil })
        switch outcome {
        case .accepted(let stream): onEvent?(.accepted(UnixConnection(stream, path: path)))
        case .refused(_, let open): onEvent?(.refused(open: open))
        case nil: break
        }
    }

    private func fail(_ error: any Error) {
        let onError = self.onError
        shutDown(connectionsEnd: .closed)
        onError?(error)
    }

    /// Closes the socket (removing its file) and every connection it accepted.
    private func shutDown(connectionsEnd reason: StreamHandle.EndReason) {
        onEvent = nil
        onError = nil
        close()
        removeCreatedFile()
        accepted.endAll(reason)
    }

    /// Removes the socket file this listener bound, if the path still names it. Once.
    private func removeCreatedFile() {
        guard let createdFile, let name else { return }
        self.createdFile = nil
        UnixSocketDescriptor.removeSocketFile(name.path, ifStill: createdFile)
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

private let unixListenerConnectionCallback: uv_connection_cb = { server, status in
    guard let data = server?.pointee.data else { return }
    Unmanaged<UnixListener>.fromOpaque(data).takeUnretainedValue().accept(status: status)
}

/// One `UnixSocket.connect` or `UnixSocket.open` subscription: get the socket, then own the connection.
final class UnixConnectAttempt: LoopDisposable, StreamHandleOwner, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.
    let loop: EventLoop
    private let path: String
    private let context: String
    private let options: UnixSocketOptions
    private var subscriber: Subscriber<UnixConnection>?
    private var stream: StreamHandle?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, path: String, context: String, options: UnixSocketOptions, subscriber: Subscriber<UnixConnection>) {
        self.loop = loop
        self.path = path
        self.context = context
        self.options = options
        self.subscriber = subscriber
    }

    /// Gets the socket from `socket` (a connect is at once: a Unix socket's does not wait for the
    /// server), hands it to libuv and sends the connection.
    ///
    /// - Parameter socket: Returns a connected descriptor (now this attempt's) and its name for messages.
    func start(_ socket: () throws(UVError) -> (descriptor: Int32, name: String)) {
        let stream: StreamHandle
        do throws(UVError) {
            let (descriptor, name) = try socket()
            stream = StreamHandle(loop: loop, transport: .pipe, limits: options.limits, origin: "from \(context)", ipc: options.ipc)
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
        stream.owner = self
        self.stream = stream
        subscriber?.sendNext(UnixConnection(stream, path: path))
    }

    func streamDidEnd(_ stream: StreamHandle, reason: StreamHandle.EndReason) {
        guard stream === self.stream else { return }
        self.stream = nil
        if case .shutDown = reason {
            finish(EventLoopError.shutDown(loop: loop.name))
        } else {
            finish(nil)
        }
    }

    /// Ends the attempt: completes (nil) or fails, and closes the connection.
    private func finish(_ error: (any Error)?) {
        let subscriber = self.subscriber
        self.subscriber = nil
        let stream = self.stream
        self.stream = nil
        stream?.end(.closed)
        if let error { subscriber?.sendError(error) } else { subscriber?.sendCompleted() }
    }

    func abandon() {
        subscriber = nil
        let stream = self.stream
        self.stream = nil
        stream?.end(.closed)
    }
}

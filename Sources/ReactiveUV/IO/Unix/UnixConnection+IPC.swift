internal import CLibUV
import Synchronization

/// Descriptor passing: handing open connections to another process (or loop) over an IPC Unix connection.
///
/// An IPC connection is a `UnixConnection` opened with
/// `UnixSocketOptions(ipc: true)` (by `UnixSocket.pair`/`open`, `connect` or
/// `listen`); both ends must be IPC. Its writer passes a connection with
/// `send(_:with:keepOpen:)`, as Node's `child.send(message, socket)` does:
/// the message's bytes and the socket's descriptor travel together
/// (`SCM_RIGHTS`), and the sender's copy is closed once it is on its way.
/// Its reader reads `incoming`, which sends the bytes as they are read and
/// each passed socket as a `TCPConnection` or `UnixConnection` homed on the
/// reading end's loop.
extension UnixConnection {
    /// What `incoming` sends: the bytes read, and each connection passed with them.
    ///
    /// Thread rule: a value; safe from any thread (the connections follow their own rule).
    public enum Incoming: Sendable {
        /// Bytes the peer wrote, one chunk per read (as `bytes` delivers them).
        case bytes([UInt8])
        /// A TCP connection the peer passed, open on this connection's loop.
        case tcp(TCPConnection)
        /// A Unix-socket connection the peer passed (not itself an IPC connection), open on this connection's loop.
        case unix(UnixConnection)
    }

    /// Whether this connection was opened for descriptor passing (`UnixSocketOptions.ipc`).
    ///
    /// Thread rule: safe from any thread.
    public var isIPC: Bool { ipc }

    /// The reader of an IPC connection: the bytes the peer writes and the connections it passes, in the order they came.
    ///
    /// A passed connection is sent right after the chunk it arrived with (the
    /// chunk ends with the message sent with it; earlier bytes may precede it
    /// in the same chunk). Like `bytes`, it is the connection's one reader
    /// (`EBUSY` while another reads), completes at EOF and fails with the
    /// connection's error.
    ///
    /// The connections it sends belong to this subscription, as a server's
    /// accepted connections belong to the server's: its end (disposal, the
    /// channel's EOF or failure) closes those still open, so keep it while
    /// you serve them. Descriptors that arrived but were not sent yet (the
    /// subscription ended in the middle of a read's) stay queued for the next
    /// reader, and are closed with the connection. It fails with `EINVAL` on a
    /// connection that is not IPC, and with `ENOTSUP` naming what came when the
    /// peer passes a descriptor that is not a connected stream socket (a UDP or
    /// Unix datagram socket, a file, a directory, a pipe, a server's listening
    /// socket: it is closed). A message carrying more descriptors than a read
    /// takes (64, libuv's limit: a peer of our own sends one per message) has
    /// the rest closed by the kernel: its chunk and the descriptors that came
    /// are sent, then it fails with `EMSGSIZE` naming how many were passed;
    /// with `EMFILE` when this process had no room for them all.
    ///
    /// Thread rule: safe from any thread.
    public var incoming: Signal<Incoming> {
        let channel = self  // captured by the signal
        return Signal { subscriber in
            LoopBinding.open(on: channel.loop, for: subscriber, what: "UnixConnection.incoming") { loop in
                guard channel.ipc else {
                    subscriber.sendError(UVError(code: UVError.invalidArgumentCode,
                                                 message: "`incoming` needs an IPC connection (UnixSocketOptions(ipc: true)); read this one with `bytes`",
                                                 context: "UnixConnection.incoming of \(channel.peerDescription)"))
                    return nil
                }
                let receiver = IPCReceiver(channel: channel, subscriber: subscriber)
                receiver.start()
                return receiver
            }
        }.debugNamed("+incoming(\(peerDescription))")
    }

    /// Passes `connection` to the peer: `message` and the connection's descriptor go out together, in write order.
    ///
    /// The peer's `incoming` sends the connection after the chunk holding
    /// `message` (at least one byte: the descriptor travels with it; frame your
    /// messages so the peer knows which one came with a connection). Each
    /// message carries exactly one descriptor (libuv's `uv_write2` passes one
    /// handle per write): never more than the 64 per message a libuv 1.44
    /// reader takes, however many connections are passed back to back. Unless
    /// `keepOpen`, the connection is closed here at once (its `bytes` reader
    /// completes, writes still queued on it fail with `ECANCELED`: wait for
    /// them first), and the socket lives on in the peer alone: its client
    /// notices nothing. Closing here closes no socket the peer holds; neither
    /// end sends EOF until both have closed it.
    ///
    /// - Parameters:
    ///   - connection: A `TCPConnection` or `UnixConnection` on this connection's loop.
    ///   - message: The bytes sent with it (not empty).
    ///   - keepOpen: Keep the connection open here too (both processes then hold the socket).
    /// - Returns: A signal that completes once the message and descriptor were
    ///   handed to the kernel, or fails: `EINVAL` when this connection is not
    ///   IPC, the message is empty, or the connection lives on another loop;
    ///   `ENOTCONN` when `connection` is closed; `EPIPE` when this connection
    ///   is closed or shut down; `ECANCELED` when it closed before the write
    ///   went out; the socket's error otherwise. On a refusal (all but the last
    ///   two) `connection` stays open here. The send starts now.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func send(_ connection: StreamConnection, with message: [UInt8], keepOpen: Bool = false) -> Signal<Void> {
        let outcome = WriteOutcome()
        let channel = self
        let passed = connection
        if channel.onLoopThread {
            channel.sendOnLoop(message, passing: passed, keepOpen: keepOpen, completion: outcome.finish)
            return outcome.signal
        }
        do {
            try channel.loop.tryExecute {
                channel.sendOnLoop(message, passing: passed, keepOpen: keepOpen, completion: outcome.finish)
            }
        } catch {
            outcome.finish(error)
        }
        return outcome.signal
    }
}

/// One `incoming` subscription: reads the IPC connection and owns the connections passed over it.
final class IPCReceiver: LoopDisposable, StreamConnectionOwner, StreamDescriptorReceiver, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable `channel` and the atomic `disposedFlag`.
    private let channel: StreamConnection
    private var subscriber: Subscriber<UnixConnection.Incoming>?
    private var reading: (any Disposable)?
    private var received: [ObjectIdentifier: StreamConnection] = [:]
    var truncation: UVError?
    let disposedFlag = Atomic<Bool>(false)

    var loop: EventLoop { channel.loop }

    init(channel: StreamConnection, subscriber: Subscriber<UnixConnection.Incoming>) {
        self.channel = channel
        self.subscriber = subscriber
    }

    /// Becomes the channel's descriptor receiver and its reader (a byte reader on this loop, forwarded).
    func start() {
        let channel = self.channel
        let previousReceiver = channel.descriptorReceiver
        channel.descriptorReceiver = self
        let bytes = Signal<[UInt8]> { reader in channel.startReading(reader) }
        reading = bytes.subscribe(
            next: { [weak self] chunk in self?.subscriber?.sendNext(.bytes(chunk)) },
            error: { [weak self] error in self?.finish(error) },
            completed: { [weak self] in self?.finish(nil) })
        if subscriber == nil || reading?.isDisposed == true, channel.descriptorReceiver === self {
            // Refused at once (EBUSY: another reader) or already ended: leave the receiver as it was.
            channel.descriptorReceiver = previousReceiver
        }
    }

    func channel(_ channel: StreamConnection, didReceive stream: StreamConnection) {
        guard let subscriber else {
            stream.end(.closed)
            return
        }
        stream.owner = self
        received[ObjectIdentifier(stream)] = stream
        switch stream.transport {
        case .tcp:
            stream.didConnectTCP(options: TCPOptions(noDelay: false))  // notes the descriptor, changes nothing
            // `descriptorsMayBePending` made a TCP socket a TCPConnection and a Unix socket a UnixConnection.
            subscriber.sendNext(.tcp(unsafeDowncast(stream, to: TCPConnection.self)))
        case .pipe:
            let connection = unsafeDowncast(stream, to: UnixConnection.self)
            // A simulated one came with its path; a real one's is read from its socket.
            if !stream.bits.simulated { connection.path = UnixSocketNames.peerName(of: stream) ?? "" }
            subscriber.sendNext(.unix(connection))
        case .childPipe, .tty, .fifo:
            // Never made for a received descriptor (the accept makes a TCP or a pipe handle).
            stream.end(.closed)
            finish(UVError(code: UV_ENOTSUP.rawValue, message: "a received descriptor became a \(stream.transport) stream", context: "receiving a connection"))
        }
    }

    func channel(_ channel: StreamConnection, failedToReceive error: UVError) {
        finish(error)
    }

    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {
        received[ObjectIdentifier(stream)] = nil
    }

    /// Ends the subscription: stops reading, closes the connections received, then tells the subscriber.
    private func finish(_ error: (any Error)?) {
        let subscriber = self.subscriber
        release()
        subscriber?.sendEnd(failure: error)
    }

    private func release() {
        subscriber = nil
        if channel.descriptorReceiver === self { channel.descriptorReceiver = nil }
        let reading = self.reading
        self.reading = nil
        reading?.dispose()
        let open = received.values
        received.removeAll()
        for stream in open { stream.end(.closed) }
    }

    func abandon() {
        release()
    }
}

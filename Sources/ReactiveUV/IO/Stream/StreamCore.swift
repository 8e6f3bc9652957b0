internal import CLibUV
import Synchronization

/// Told when a connection it handed out has ended (so a server can forget it, a connect signal can complete).
protocol StreamConnectionOwner: AnyObject {
    /// Called on the loop thread once, right after the stream started closing.
    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason)
    /// Called on the loop thread after EOF was read and the reader completed (the stream stays open).
    func streamDidReadEndOfFile(_ stream: StreamConnection)
}

/// A weak reference to a stream's owner, shared by every stream the owner holds when it makes one
/// (`AcceptedStreams`), else made per stream by `StreamConnection.owner`'s setter.
///
/// Thread rule: loop thread only (the streams').
final class StreamOwnerLink {
    // Loop thread only.
    weak var owner: (any StreamConnectionOwner)?

    init(_ owner: any StreamConnectionOwner) { self.owner = owner }
}

extension StreamConnection {
    /// Told once when the stream ends (then forgotten); nil when nobody is.
    ///
    /// Thread rule: loop thread only.
    var owner: (any StreamConnectionOwner)? {
        get { ownerLink?.owner }
        set { ownerLink = newValue.map { StreamOwnerLink($0) } }
    }
}

extension StreamConnectionOwner {
    /// A socket follows its half-close rule at EOF (`StreamCore+HalfClose.swift`): nothing more to do by default.
    func streamDidReadEndOfFile(_ stream: StreamConnection) {}
}

/// One open byte-stream connection: what `TCPConnection` and `UnixConnection` share.
///
/// - `bytes` streams what the peer sends (one reader at a time); it completes
///   at EOF and fails when the peer resets.
/// - `send(_:)` queues bytes with no result (the fast path); `write(_:)` does
///   the same and returns a signal that completes once libuv flushed them.
///   Bytes go out in the order the calls were made.
/// - `shutdown()` half-closes (EOF to the peer after the queued writes);
///   `close()` closes gracefully (the queued writes are flushed, then EOF,
///   then the socket closes); `reset()` closes at once, dropping what is
///   queued (with RST on TCP).
///
/// Write code that only reads and writes (an echo handler, a protocol
/// codec) against `StreamConnection`, and it serves TCP and Unix-socket
/// connections alike; the subclasses add what only their transport has
/// (addresses and socket options for TCP, the socket path for Unix).
///
/// Half-close: by default (Node's `allowHalfOpen: false`) the connection
/// closes itself after the peer's EOF, once the application has had its
/// turn. The EOF completes `bytes` after every chunk read before it; when the
/// reader has taken that end (an observer's completion handler returned, or
/// a task iterating `bytes.values` left its loop) and one more loop turn has
/// passed, the connection closes as `close()` does: everything queued is
/// sent first. A write made later fails with `EPIPE`. With
/// `TCPOptions.allowHalfOpen` (or `UnixSocketOptions.allowHalfOpen`) the
/// connection stays open for writing until you call `close()`.
///
/// Lifetime: the connection belongs to the subscription that produced it. It
/// stays open until `close()` has flushed, `reset()`, a read or write
/// failure, the disposal of that subscription (a server's disposal closes
/// every connection it accepted, at once), or the loop's shutdown.
/// Backpressure and the buffering limit are described in `StreamBufferLimits`.
///
/// Thread rule: every method is safe from any thread; work is done on the
/// connection's loop (calls made there run at once, others are queued there in order).
public class StreamConnection: LoopHandleOwner, SingleReaderSource, FlowControlMaker, ObserverReleasing,
                               CustomStringConvertible, @unchecked Sendable {
    // Loop thread only (the public methods hop there first), except the immutable fields, the
    // atomic `openState` (written on the loop, read anywhere) and `extrasSlot` (made by a
    // compare-and-swap from any thread; `StreamExtras` gives its fields' rules).
    //
    // The connection owns its libuv handle (`handleCell`) and speaks to it through `io`
    // (`UVStream`, the backend seam). What only TCP has lives in `TCPStream.swift`; what only
    // Unix sockets have, in the Unix family.

    typealias Input = StreamStateBits.Input

    // Declaration order is layout order: the one-byte fields follow `handleState` into the word
    // it starts, so an idle server's connections stay in the smallest malloc block they fit.
    /// The connection's libuv handle (immutable: its loop is read without a retain).
    final let handleCell: LoopHandleCell
    @exclusivity(unchecked) final var handleState = LoopHandleState.unopened
    /// The transport and whether it passes descriptors (immutable: read from any thread).
    final let streamKind: StreamKind
    /// The stream's flags, where its reading stands and its bulk-read state, packed (see `StreamStateBits`).
    @exclusivity(unchecked) final var bits = StreamStateBits()

    /// What the stream runs over.
    final var transport: Transport { streamKind.transport }
    /// A pipe opened for descriptor passing (`uv_pipe_init` with `ipc` 1): see `StreamDescriptorPassing.swift`.
    final var ipc: Bool { streamKind.ipc }
    /// Whether the stream is open and how it ended, for every thread, and a TCP socket's descriptor
    /// (where its addresses are read on demand): the descriptor (0 or more) once a TCP stream is
    /// connected or accepted; `OpenState.openCode` while open otherwise; one of `OpenState`'s end
    /// codes from the moment the stream starts closing. Written on the loop thread (the end
    /// sequentially consistent, before `uv_close`: see `TCPStream.swift`), read anywhere.
    final let openState = Atomic<Int32>(OpenState.openCode)
    /// What made this stream, for leak reports, and its limits: shared by every connection a listener accepted.
    final let originLabel: StreamOrigin
    /// Who is told of the stream's end (see `owner`): a link a listener shares with every
    /// connection it accepted (a weak existential here would be two words in each).
    @exclusivity(unchecked) final var ownerLink: StreamOwnerLink?
    /// This stream's place in its listener's list of accepted connections (`AcceptedStreams`).
    @exclusivity(unchecked) final var acceptedLinks = IntrusiveLinks<StreamConnection>()
    /// What only some streams need (queued writes, file sends, `writable`, close waiters, sends
    /// from other threads, addresses, names): made on first use, see `StreamExtras`.
    final let extrasSlot = LazyObject<StreamExtras>()
    /// The reader: `bytes`' subscriber or a shared `StreamReader` (the slot keeps no token:
    /// `ReaderSlot.currentReaderIsDisposed`).
    @exclusivity(unchecked) final var readers = ReaderSlot<StreamReaderTarget>()
    /// What `SingleReaderSource` calls `Self` (this class, not a subclass: a reader's token is the core's).
    typealias TokenSource = StreamConnection

    /// Finished write requests kept for reuse, per connection.
    static let writePoolLimit = 16

    convenience init(loop: EventLoop, transport: Transport, limits: StreamBufferLimits, origin: String, ipc: Bool = false,
                     readChunkLimit: Int = ReadBuffer.size) {
        self.init(loop: loop, transport: transport, limits: limits,
                  originLabel: StreamOrigin(origin, limits: limits, readChunkLimit: readChunkLimit), ipc: ipc)
    }

    /// A stream whose origin label is shared (a listener's, for every connection it accepts).
    init(loop: EventLoop, transport: Transport, limits: StreamBufferLimits, originLabel: StreamOrigin, ipc: Bool = false) {
        _ = ignoreBrokenPipeSignalOnce
        streamKind = StreamKind(transport, ipc: ipc && transport == .pipe)
        // A listener's label carries its options' limits: every connection it accepts shares both.
        self.originLabel = originLabel.limits == limits
            ? originLabel
            : StreamOrigin(originLabel.text, limits: limits, readChunkLimit: originLabel.readChunkLimit,
                           peerName: originLabel.peerName, tracksActivity: originLabel.tracksActivity)
        handleCell = LoopHandleCell(loop: loop, byteCount: UVStream.byteCount(for: transport))
    }

    deinit { ownerWillDie() }

    /// The loop the connection's socket lives on: its thread runs the connection's work.
    ///
    /// Thread rule: safe from any thread (immutable).
    public final var loop: EventLoop { handleCell.loop }

    static var closeCallback: uv_close_cb { streamCloseCallback }

    /// The connection's backend, as the stream core speaks to it: libuv's, or a simulated end.
    final var io: StreamIO { StreamIO(connection: self) }

    /// The handle as libuv's stream type, for the families that call libuv on it themselves
    /// (listeners accepting into it, descriptor passing, a child's stdio).
    final var uvStream: UnsafeMutablePointer<uv_stream_t> { pointer(as: uv_stream_t.self) }

    /// How much unflushed written data the stream holds, and when reading pauses (kept in `originLabel`).
    final var limits: StreamBufferLimits { originLabel.limits }

    /// The largest chunk one read hands the reader, 1...`ReadBuffer.size` (kept in `originLabel`).
    final var readChunkLimit: Int { originLabel.readChunkLimit }

    /// What made this stream, for leak reports ("accepted by TCPServer.listen(127.0.0.1:80)").
    final var origin: String { originLabel.text }

    /// The other end for messages: its address for TCP ("10.0.0.2:5000", read on first use; `namedPeer`
    /// or "peer" when it cannot be read), the socket path for a Unix socket.
    ///
    /// Thread rule: safe from any thread once the stream is handed out (the setter: before that).
    final var peerDescription: String {
        get {
            if transport == .tcp, let text = tcpPeerText { return text }
            return namedPeer ?? originLabel.peerName ?? "peer"
        }
        set { namedPeer = newValue }
    }

    /// What the connection is, for logs: `"tcp 127.0.0.1:5000 -> 127.0.0.1:41234"`, `"unix /run/app.sock"`.
    ///
    /// Declared here, not with the rest of the public API, so that the subclasses can override it.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { "\(transport) connection with \(peerDescription)" }

    var label: String {
        switch transport {
        case .tcp: "tcp connection\(peerDescription == "peer" ? "" : " with \(peerDescription)") \(origin)"
        case .pipe: "unix socket connection on \(peerDescription) \(origin)"
        case .childPipe: "pipe to the \(peerDescription) \(origin)"
        case .tty: "tty \(peerDescription) \(origin)"
        case .fifo: "FIFO \(peerDescription) \(origin)"
        }
    }

    /// Initializes the handle (`uv_tcp_init`, `uv_pipe_init`) and lists it with the loop.
    final func open() throws(UVError) {
        guard transport != .tty, transport != .fifo else {
            throw UVError(code: UVError.invalidArgumentCode, message: "a \(transport) stream is opened on a descriptor", context: "open of \(origin)")
        }
        try io.initialize(transport, ipc: ipc, descriptor: nil, on: loop)
        didOpen()
    }

    /// Opens the handle on a descriptor that is already open.
    ///
    /// libuv never closes descriptors 0, 1 and 2 when the handle closes (it closes any other, so
    /// the handle owns `descriptor` from here on). `uv_tty_init` reopens a terminal's device and
    /// puts it over `descriptor`, so making it non-blocking does not touch other processes; a pipe
    /// or socket is made non-blocking in place. On failure the handle is closed (the descriptor is not).
    final func open(descriptor: Int32) throws(UVError) {
        try io.initialize(transport, ipc: false, descriptor: descriptor, on: loop)
        didOpen()
        do {
            try io.adopt(descriptor, transport)
        } catch {
            closeHandle()
            throw error
        }
    }

    /// Bytes written and not yet taken by the kernel: libuv's queue and the batch gathered behind it.
    final var loopQueuedWriteByteCount: Int { isHandleOpen ? io.queuedByteCount + batchedByteCount : 0 }

    final func closedError(_ operation: String) -> UVError {
        UVError(code: UV_ENOTCONN.rawValue, message: "the connection is closed", context: "\(operation) on \(peerDescription)")
    }

    func willClose() {
        // A close without `end` (a failed open) ended it as `.closed`.
        if openState.load(ordering: .relaxed) >= OpenState.openCode { recordEnd(.closed) }
    }

    func closeForShutdown() {
        end(.shutDown)
    }

    func didClose() {
        if let extras = extrasIfMade {
            // libuv called back every request before this: a batch still open had none in front of it.
            cancelBatch(extras)
            runFlushWaitersIfFlushed(extras)
            if let writePool = extras.writePool {
                for index in 0..<extras.writePoolCount { writePool[index].release() }
                writePool.deallocate()
            }
            extras.writePool = nil
            extras.writePoolCount = 0
            extras.fileSends = nil
            extras.bulkChunk = []
        }
        readers.take()
        ownerLink = nil
        if bits.tls { tlsDidClose() }
    }
}

private let streamCloseCallback: uv_close_cb = { StreamConnection.finishClose($0) }

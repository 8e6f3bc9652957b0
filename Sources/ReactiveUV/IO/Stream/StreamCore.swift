internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
public class StreamConnection: LoopHandleOwner, StreamShutdownOwner, SingleReaderSource, FlowControlMaker, ObserverReleasing,
                               CustomStringConvertible, @unchecked Sendable {
    // Loop thread only (the public methods hop there first), except `streamKind` and `originLabel`
    // (immutable), the atomic `openState` (written on the loop, read anywhere) and `extrasSlot`
    // (made by a compare-and-swap from any thread; see `StreamExtras` for its fields' rules).
    //
    // The connection is its stream core (the `uv_stream_t`'s owner): one object per connection
    // besides libuv's handle memory. Everything in this file runs on the loop thread; the public
    // methods (`StreamConnection.swift`) hop there first. Reads go into the loop's shared
    // `ReadBuffer` and are copied out once per chunk (into a recycled array while the reader lets
    // go of each chunk); writes use pooled requests and point libuv at the caller's array. What
    // only TCP has (addresses, `TCP_NODELAY`, keep-alive) lives in `TCPStream.swift`; what only
    // Unix sockets have, in `UnixSocket*.swift`.

    typealias Input = StreamStateBits.Input

    // Declaration order is layout order (Swift does not reorder a class's fields): the small fields
    // come first, right after `LoopHandle`'s own 49 bytes, then the four-byte one, then the rest, so
    // padding does not grow every connection (an idle server holds one of these per client). The
    // transport and the sixteen state bits end at 52 and `openState` at 56, so the fields end at
    // 104 bytes, a 112-byte malloc block: one more byte here would pad every stream by eight.
    /// The connection's libuv handle, then where its life stands.
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
    /// Whether the stream is open, and how it ended, for every thread, and the TCP socket's
    /// descriptor, where the addresses are read on demand: the descriptor (0 or more) once a TCP
    /// stream is connected or accepted; `OpenState.openCode` while open otherwise; one of
    /// `OpenState`'s end codes from the moment the stream starts closing. Written on the loop
    /// thread (the end sequentially consistent, before `uv_close`: see `TCPStream.swift`), read
    /// anywhere: a query from another thread never waits for the loop. One four-byte word for
    /// what were a descriptor, an end reason and a published write queue (20 bytes).
    final let openState = Atomic<Int32>(OpenState.openCode)
    /// What made this stream, for leak reports, and its limits: shared by every connection a listener accepted.
    final let originLabel: StreamOrigin
    /// Who is told of the stream's end (see `owner`): one reference, to a link a listener shares
    /// with every connection it accepted (a weak existential here would be two words in each).
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

    /// Reads up to this many bytes are copied into the loop's `spareReadChunk` (see `smallChunk`).
    private static let spareChunkLimit = 4096

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
        handleCell = LoopHandleCell(loop: loop, byteCount: uv_handle_size(transport.handleType))
    }

    deinit { ownerWillDie() }

    /// The loop the connection's socket lives on: its thread runs the connection's work.
    ///
    /// Thread rule: safe from any thread (immutable).
    public final var loop: EventLoop { handleCell.loop }

    static var closeCallback: uv_close_cb { streamCloseCallback }

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

    final var uvStream: UnsafeMutablePointer<uv_stream_t> { pointer(as: uv_stream_t.self) }

    /// `uv_tcp_init` or `uv_pipe_init`, and registration with the loop.
    final func open() throws(UVError) {
        switch transport {
        case .tcp: try uvCheck(uv_tcp_init(loop.uvLoop, pointer(as: uv_tcp_t.self)), "uv_tcp_init")
        case .pipe, .childPipe: try uvCheck(uv_pipe_init(loop.uvLoop, pointer(as: uv_pipe_t.self), ipc ? 1 : 0), "uv_pipe_init")
        case .tty, .fifo:
            throw UVError(code: UVError.invalidArgumentCode, message: "a \(transport) stream is opened on a descriptor", context: "open of \(origin)")
        }
        didOpen()
    }

    /// Bytes written and not yet taken by the kernel: libuv's queue and the batch gathered behind it.
    final var loopQueuedWriteByteCount: Int { isHandleOpen ? Int(uv_stream_get_write_queue_size(uvStream)) + batchedByteCount : 0 }

    final func closedError(_ operation: String) -> UVError {
        UVError(code: UV_ENOTCONN.rawValue, message: "the connection is closed", context: "\(operation) on \(peerDescription)")
    }

    // MARK: - reading

    /// Makes `subscriber` the reader; returns what stops it, or nil when it was already answered.
    final func startReading(_ subscriber: Subscriber<[UInt8]>) -> (any Disposable)? {
        startReading(.subscriber(subscriber))
    }

    /// Makes `subscriber` (a gate, or a sink on this loop: `HomeGate`) the reader; returns what
    /// stops it, or nil when it was already answered.
    final func startReading(_ subscriber: HomeGate<[UInt8]>) -> (any Disposable)? {
        guard admitReader(.gate(subscriber)) else { return nil }
        switch subscriber {
        case .subscriber(let gate) where !bits.readerIsHome:
            registerFlowControl(with: gate)
        case .subscriber, .sink:
            // Made when a consumer first asks (most readers never pause): see `makeFlowControl(for:)`.
            subscriber.subscription.deferFlowControl(to: self)
        }
        switch subscriber {
        case .sink(let sink):
            // No gate at the sink's root: the stream takes that place, and is told at teardown.
            assert(!sink.subscription.hasRoot, "a sink reader's subscription already has a root")
            sink.subscription.attachRoot(self)
            return nil
        case .subscriber:
            return ReaderToken(self)
        }
    }

    /// Makes `reader`, shared by many connections, this stream's reader (`read(with:)`): no
    /// subscription, no token and no flow control; `stopSharedReader()` stops it.
    final func startReading(sharedBy reader: StreamReader) {
        admitReader(.shared(reader))
    }

    /// What every reader goes through: an ended stream answers it at once, a second reader gets
    /// `EBUSY`, and otherwise it becomes the reader and reading starts (unless write backpressure
    /// holds it). False when the reader was answered instead.
    @discardableResult
    private func admitReader(_ reader: StreamReaderTarget) -> Bool {
        assertInEventLoop()
        if bits.input == .ended {
            reader.sendCompleted(from: self)
            return false
        }
        guard isHandleOpen else {
            switch endReason {
            case .failed(let error)?: reader.sendError(error, from: self)
            case .shutDown?: reader.sendError(EventLoopError.shutDown(loop: loop.name), from: self)
            case .closed?, nil: reader.sendCompleted(from: self)
            }
            return false
        }
        guard readers.reader == nil else {
            reader.sendError(UVError(code: UV_EBUSY.rawValue,
                                     message: "the connection is already being read (by a `bytes` subscriber or a `StreamReader`): a byte stream has one reader at a time",
                                     context: "\(transport.connectionTypeName).bytes of \(peerDescription)"), from: self)
            return false
        }
        bits.writeBackpressure = limits.pausesReading && loopQueuedWriteByteCount > limits.highWaterMark
        bits.consumerPaused = false
        bits.input = .paused
        readers.fill(reader)
        switch reader {
        case .gate(let gate): bits.readerIsHome = gate.homeIdentity == loopIdentity
        case .shared: bits.readerIsHome = true
        }
        if let error = updateReading() {
            readers.take()
            bits.input = .idle
            reader.sendError(error, from: self)
            return false
        }
        return true
    }

    /// The reader's flow control, registered with it.
    @discardableResult
    private func registerFlowControl(with subscriber: Subscriber<[UInt8]>) -> FlowControl? {
        // Strong captures: a weak one would give the stream a side table and slow every
        // retain of it; the cycle ends when the subscription's teardown drops the flow control.
        subscriber.setFlowControl(
            pause: { self.setConsumerPaused(true) },
            resume: { self.setConsumerPaused(false) })
        return subscriber.registeredFlowControl
    }

    package final func makeFlowControl(for subscription: Subscription) -> FlowControl? {
        guard let reader = readers.reader, reader.subscription === subscription else { return nil }
        switch reader {
        case .gate(.subscriber(let gate)):
            return registerFlowControl(with: gate)
        case .shared:
            return nil
        case .gate(.sink):
            // A reader on this loop: nothing is hopped, so there is nothing for a gate to count.
            return FlowControl(sourceScheduler: loop, pause: { self.setConsumerPaused(true) },
                               resume: { self.setConsumerPaused(false) })
        }
    }

    private func setConsumerPaused(_ paused: Bool) {
        guard readers.reader != nil else { return }
        bits.consumerPaused = paused
        updateReading()
    }

    /// Starts or stops libuv's reading to match the reader and both pause reasons.
    @discardableResult
    final func updateReading() -> UVError? {
        guard isHandleOpen, readers.reader != nil, bits.input == .reading || bits.input == .paused else { return nil }
        let shouldRead = !bits.writeBackpressure && !bits.consumerPaused
        if shouldRead && bits.input == .paused {
            do {
                // An IPC pipe's allocation also peeks at the descriptors coming (chosen here, not per read).
                try uvCheck(uv_read_start(uvStream, ipc ? ipcStreamAllocate : streamAllocate, streamReadCallback), "uv_read_start")
            } catch {
                return error
            }
            bits.input = .reading
            if ipc { descriptorsMayBePending() }
        } else if !shouldRead && bits.input == .reading {
            uvCheckReporting(uv_read_stop(uvStream), "uv_read_stop")
            bits.input = .paused
        }
        return nil
    }

    /// Whether libuv is reading for a reader now (not idle, paused or ended).
    final var isReading: Bool { bits.input == .reading }
    /// Open and not shut down for writing.
    final var acceptsWrites: Bool { isHandleOpen && !bits.writesShutDown }

    /// Stops reading and ends the reader (completes it with nil, else fails it); the stream stays open and can be read again.
    final func endReader(_ error: (any Error)?) {
        assertInEventLoop()
        if bits.input == .reading { uvCheckReporting(uv_read_stop(uvStream), "uv_read_stop") }
        if bits.input != .ended { bits.input = .idle }
        bits.consumerPaused = false
        guard let reader = readers.take() else { return }
        if let error { reader.sendError(error, from: self) } else { reader.sendCompleted(from: self) }
    }

    /// Stops reading for the reader `token` belongs to (a later reader keeps reading).
    final func stopReading(_ token: ReaderToken<StreamConnection>) {
        stopDisposedReader()
    }

    /// Stops reading for the current reader if its subscription is disposed (a replaced reader's
    /// disposal leaves the next one reading: `ReaderSlot.currentReaderIsDisposed`). Loop thread only.
    private func stopDisposedReader() {
        assertInEventLoop()
        guard readers.currentReaderIsDisposed else { return }
        dropReader()
    }

    /// Stops a shared reader (`StreamConnection.stopReading()`), telling it nothing; a `bytes`
    /// subscriber is left alone (its subscription's disposal stops it). Loop thread only.
    final func stopSharedReader() {
        assertInEventLoop()
        guard case .shared? = readers.reader else { return }
        dropReader()
    }

    /// Empties the reader slot without telling the reader, and stops libuv's reading.
    private func dropReader() {
        readers.take()
        if bits.input == .reading { uvCheckReporting(uv_read_stop(uvStream), "uv_read_stop") }
        if bits.input != .ended { bits.input = .idle }
        bits.consumerPaused = false
    }

    /// A sink reader's subscription was torn down (the stream is its root: `startReading`): stops
    /// reading for it, if it is still the current reader. On the loop's thread, or queued there (a
    /// home loop that has closed tears down on the disposer's thread; a loop refusing work has
    /// ended its readers already).
    package final func releaseObserver() {
        if loop.inEventLoop {
            stopDisposedReader()
        } else {
            _ = loop.enqueue { [self] in stopDisposedReader() }
        }
    }

    /// Gives libuv the memory for the next read.
    ///
    /// Small reads (requests, messages) go into the thread's shared buffer and
    /// are copied out at their size (a buffer is `readChunkLimit` bytes, 64 KiB
    /// unless a FIFO's reader asked for less). Once a read fills half a buffer, the
    /// stream reads straight into a fresh full-size array that is then handed
    /// to the reader trimmed to the bytes read (see `BulkReads` for when it stops):
    /// bulk transfers cost no copy at all, at the price of up to 2x spare capacity
    /// per chunk (4x for the short read that ends a burst). The array's
    /// storage does not move while `bulkChunk` holds it uniquely and it is not
    /// resized, so libuv may write into it between the two callbacks.
    fileprivate func allocate(_ buffer: UnsafeMutablePointer<uv_buf_t>) {
        guard bits.bulkReads != .off else {
            buffer.pointee = uv_buf_t(base: loop.readBuffer.assumingMemoryBound(to: CChar.self), len: readChunkLimit)
            return
        }
        let size = readChunkLimit
        // Bulk reads keep their array in the extras: an idle connection holds no slot for it.
        let extras = self.extras
        if extras.bulkChunk.count != size {
            // Every byte is written by the read before any is looked at; the rest is trimmed unread.
            extras.bulkChunk = [UInt8](unsafeUninitializedCapacity: size) { _, count in count = size }
        }
        let base = extras.bulkChunk.withUnsafeMutableBufferPointer { $0.baseAddress! }
        // `size` is at most `ReadBuffer.size` (64 KiB): it fits.
        buffer.pointee = uv_buf_init(UnsafeMutableRawPointer(base).assumingMemoryBound(to: CChar.self), UInt32(size))
    }

    /// `allocate` on an IPC pipe, then a peek at the descriptors the read will take (`peekBeforeIPCRead`).
    fileprivate func allocateOnIPCPipe(_ buffer: UnsafeMutablePointer<uv_buf_t>) {
        allocate(buffer)
        peekBeforeIPCRead(buffer)
    }

    fileprivate func didRead(_ count: Int, _ buffer: UnsafePointer<uv_buf_t>?) {
        if count > 0 {
            noteActivityIfTracked()
            let wasBulk = bits.bulkReads != .off
            bits.bulkReads = bits.bulkReads.after(reading: count, limit: readChunkLimit)
            // A bulk read's array is handed over when the read filled a quarter of it at least, so a
            // chunk's spare capacity stays under 4x (2x but for the short read that ends a burst);
            // a shorter one is copied out below and its array let go of (an idle connection keeps none).
            // Moved out of the extras, so trimming it below finds it unique and copies nothing.
            var bulkChunk = wasBulk ? extrasIfMade?.takeBulkChunk() ?? [] : []
            // Each branch hands its chunk straight to the reader (no local copy kept past the call).
            if !bulkChunk.isEmpty, count >= readChunkLimit / 4 {
                bulkChunk.removeLast(bulkChunk.count - count)
                readers.reader?.deliver(bulkChunk, from: self, home: bits.readerIsHome)
            } else if bits.readerIsHome, count <= StreamConnection.spareChunkLimit, let base = buffer?.pointee.base {
                // Only for a reader on this thread: a chunk hopped to another loop is released there,
                // and the thread sanitizer cannot see the runtime's ordering between that release
                // and a refill here (a reader elsewhere gets a fresh array per read, as before).
                if let reader = readers.reader { reader.deliver(smallChunk(UnsafeRawBufferPointer(start: base, count: count)), from: self, home: true) }
            } else if let reader = readers.reader {
                reader.deliver(ReadBuffer.copy(buffer?.pointee.base, count: count), from: self, home: bits.readerIsHome)
            }
            // A short bulk read was copied out of `bulkChunk`'s storage: it lives until here.
            withExtendedLifetime(bulkChunk) {}
            if ipc { didReadOnIPCPipe() }
        } else if count == endOfFileCode {
            uvCheckReporting(uv_read_stop(uvStream), "uv_read_stop")
            bits.input = .ended
            bits.peerEnded = true
            extrasIfMade?.bulkChunk = []
            let reader = readers.take()
            let control = reader?.registeredFlowControl
            reader?.sendCompleted(from: self)
            owner?.streamDidReadEndOfFile(self)
            if !limits.allowsHalfOpen, let reader { closeOnceEndTaken(home: reader.subscription?.home ?? loop, control: control) }
        } else if count == Int(UV_ENOBUFS.rawValue) && ipc {
            // `peekBeforeIPCRead` found nothing to read and gave libuv no room: nothing happened.
        } else if count < 0 {
            end(.failed(UVError(code: Int32(count), context: "reading from \(peerDescription)")))
        }
    }

    /// Copies a small read into the loop's `spareReadChunk` and returns it, without allocating when possible.
    ///
    /// A chunk's array is handed to the reader, which usually lets go of it
    /// before the next read (or forwards it to a write that has finished by
    /// then). The loop keeps a reference, and the next small read of any of
    /// its streams refills that storage in place: Array's copy-on-write checks
    /// that the reference is the only one and makes a new array when it is
    /// not, so no chunk a reader still holds ever changes. A request/response
    /// exchange of small messages then costs no allocation per read, and a
    /// connection keeps no chunk of its own between reads (one per loop, not
    /// up to 4 KiB per connection that once read).
    private func smallChunk(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let loop = self.loop
        if bytes.count == loop.spareReadChunk.count {
            loop.spareReadChunk.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        } else if bytes.count <= loop.spareReadChunk.capacity {
            loop.spareReadChunk.removeAll(keepingCapacity: true)
            loop.spareReadChunk.append(contentsOf: bytes)
        } else {
            loop.spareReadChunk = Array(bytes)
        }
        return loop.spareReadChunk
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
    }
}

private let streamCloseCallback: uv_close_cb = { StreamConnection.finishClose($0) }

// Both callbacks borrow the stream without a retain: `data` holds the retain
// taken in `didOpen()`, released only in the close callback, which libuv runs
// after the last read callback (a closing handle stops reading first).
private let streamAllocate: uv_alloc_cb = { handle, _, buffer in
    guard let data = handle?.pointee.data, let buffer else { return }
    Unmanaged<StreamConnection>.fromOpaque(data)._withUnsafeGuaranteedRef { $0.allocate(buffer) }
}

private let ipcStreamAllocate: uv_alloc_cb = { handle, _, buffer in
    guard let data = handle?.pointee.data, let buffer else { return }
    Unmanaged<StreamConnection>.fromOpaque(data)._withUnsafeGuaranteedRef { $0.allocateOnIPCPipe(buffer) }
}

private let streamReadCallback: uv_read_cb = { stream, count, buffer in
    guard let data = stream?.pointee.data else { return }
    Unmanaged<StreamConnection>.fromOpaque(data)._withUnsafeGuaranteedRef { $0.didRead(count, buffer) }
}

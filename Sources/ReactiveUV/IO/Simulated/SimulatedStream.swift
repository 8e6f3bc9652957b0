internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// One end of a simulated byte stream, the stream core's backend on a simulated loop (see
/// `StreamIO`): what its stream writes reaches the peer end after the link's latency, in order;
/// FIN and RST travel the same way. Every effect is a callback of a loop (a timer for the
/// latency, queued work for a read, a write's or shutdown's completion, the close), so a
/// simulation orders and traces it.
///
/// It answers the stream as libuv would: `readBuffer()` then `didRead` with a count, `UV_EOF` or
/// `UV_ECONNRESET`; `writeDidFinish` for each write in order (before the close callback, status 0:
/// the bytes were all taken); `shutdownDidFinish` after the writes queued before it (`ECANCELED`
/// if the stream closes first); the close callback after everything else.
///
/// Thread rule: loop thread only (its stream's); the peer is touched only from the peer's loop.
final class SimulatedStreamEnd: @unchecked Sendable {
    // Sendable: every field is touched on `loop`'s thread only (the closures sent to other loops
    // touch the peer end on its own loop).

    let loop: EventLoop
    /// Time from a write here to its arrival at the peer.
    let latency: Duration
    /// The stream this end serves, from `openSimulated` until its close callback.
    private(set) var connection: StreamConnection?
    /// The other end (each stream owns its own end, so neither keeps the other alive).
    weak var peer: SimulatedStreamEnd?

    // The fields each packet, read and write touch: loop thread only, and no access spans a call
    // that could re-enter it, so exclusivity is unchecked (as the loop's own queues are).
    @exclusivity(unchecked) private var inbound: [UInt8] = []
    @exclusivity(unchecked) private var inboundStart = 0
    /// `UV_EOF` or `UV_ECONNRESET` once the peer's FIN or RST arrived; read after the bytes before it.
    @exclusivity(unchecked) private var inboundEnd: Int32?
    @exclusivity(unchecked) private var endDelivered = false
    @exclusivity(unchecked) private var reading = false
    @exclusivity(unchecked) private var readQueued = false
    /// Writes started and not yet called back, oldest first (each holds the reference handed over).
    @exclusivity(unchecked) private var pendingWrites: [Unmanaged<WriteRequest>] = []
    private var pendingShutdown: ShutdownRequest?
    /// What the peer's kernel has not taken yet of the newest pending writes, oldest first (short
    /// writes: `SimulatedStream+ShortWrites.swift`); FIN waits behind it when `finAfterBacklog`.
    @exclusivity(unchecked) var backlog: [ArraySlice<UInt8>] = []
    var backlogBytes = 0
    var finAfterBacklog = false
    /// The next time the peer's window opens for the backlog, while it is not empty.
    var windowTimer: (any Disposable)?
    /// Pending writes the close found untaken: their callbacks say `ECANCELED`, as libuv's do.
    private var cancelledAtClose = 0
    /// Descriptor passing (`SimulatedStream+Passing.swift`): the end this one's socket was handed
    /// to (it relays what arrives here), the relay kept alive by the end it was handed to, the
    /// ends passed in with this end's bytes, and the bytes received and read (their boundaries).
    @exclusivity(unchecked) weak var handedTo: SimulatedStreamEnd?
    var relay: SimulatedStreamEnd?
    @exclusivity(unchecked) var passedIn: [PassedEnd] = []
    /// Sockets passed while a short write's rest waited: they go, with their messages, after it.
    var passesAfterBacklog: [(message: [UInt8], passed: PassedEnd)] = []
    @exclusivity(unchecked) var bytesReceived = 0
    @exclusivity(unchecked) var bytesRead = 0
    /// When the last transmission arrives at the peer (virtual nanoseconds): later ones never overtake it.
    @exclusivity(unchecked) private var lastArrival: UInt64 = 0
    private var sentEnd = false
    private var sendsReset = false
    /// Its stream started closing: nothing more is received.
    @exclusivity(unchecked) private(set) var isClosed = false
    /// A reset drawn from the seed (`injectReset`), cancelled by the close.
    private var faultTimer: (any Disposable)?
    /// When a byte last crossed this end either way, or arrived unread (virtual nanoseconds): its idle time's start.
    @exclusivity(unchecked) private(set) var lastActivity: UInt64
    /// One end of a pipe (a child's standard stream): the other end's close reaches here as EOF,
    /// and a write after it fails with `EPIPE`, as a pipe without a reader does.
    var isOneWayPipe = false

    init(loop: EventLoop, latency: Duration) {
        self.loop = loop
        self.latency = latency
        lastActivity = loop.now.nanoseconds
    }

    /// How long no byte crossed this end, in whole milliseconds of virtual time.
    var idleMilliseconds: UInt64 {
        let now = loop.now.nanoseconds
        return now > lastActivity ? (now - lastActivity) / 1_000_000 : 0
    }

    /// Connects two ends: each one's writes arrive at the other.
    static func connect(_ first: SimulatedStreamEnd, _ second: SimulatedStreamEnd) {
        first.peer = second
        second.peer = first
    }

    /// Serves `connection` (called by `StreamConnection.openSimulated`).
    func attach(_ connection: StreamConnection) {
        self.connection = connection
    }

    /// Takes `other`'s unread bytes and arrived end: its socket was handed to this end.
    func takeUnread(from other: SimulatedStreamEnd) {
        inbound = Array(other.inbound[other.inboundStart...])
        bytesReceived = inbound.count
        if !other.endDelivered { inboundEnd = other.inboundEnd }
        // Writes from here never overtake those the old end sent.
        lastArrival = other.lastArrival
        other.inbound = []
        other.inboundStart = 0
    }

    // MARK: - the stream's calls

    func startReading() -> UVError? {
        reading = true
        queueReadIfReady()
        return nil
    }

    func stopReading() {
        reading = false
    }

    var unreadByteCount: Int32? { Int32(clamping: inbound.count - inboundStart) }

    /// Sends `bytes[written...]` now; the request is called back as the next callbacks run.
    func write(_ bytes: [UInt8], skipping written: Int, with request: WriteRequest) -> Int32 {
        if inboundEnd == UV_ECONNRESET.rawValue { return UV_ECONNRESET.rawValue }
        if isOneWayPipe, inboundEnd != nil { return UV_EPIPE.rawValue }
        request.payload = bytes
        // Read by `LoopRequest.cancel`; libuv would have written it.
        request.request.pointee.type = UV_WRITE
        request.willStart(handingOver: true)
        pendingWrites.append(Unmanaged.passUnretained(request))
        let rest = bytes[written...]
        let taken = backlog.isEmpty ? (loop.simulatedNetwork?.writeSize(rest.count) ?? rest.count) : 0
        transmit(rest.prefix(taken))
        if taken == rest.count {
            loop.execute { [self] in finishOldestWrite() }
        } else {
            holdBack(rest.dropFirst(taken))
        }
        return 0
    }

    /// FIN after the writes sent before it; the request is called back after theirs.
    func shutdown(_ request: ShutdownRequest) throws(UVError) {
        request.request.pointee.type = UV_SHUTDOWN
        try request.start("shutdown of a simulated stream") { 0 }
        pendingShutdown = request
        if !backlog.isEmpty { return finAfterBacklog = true }
        sendEnd(reset: false)
        loop.execute { [self] in finishShutdown(status: 0) }
    }

    /// The close to come sends RST, not FIN.
    func resetOnClose() {
        sendsReset = true
    }

    /// The stream started closing: FIN (or RST) goes to the peer, then the close callback runs,
    /// after the writes' and the shutdown's.
    func close() {
        reading = false
        isClosed = true
        faultTimer?.dispose()
        faultTimer = nil
        cancelledAtClose = dropBacklog()
        closePassedIn()
        // A socket handed to another process lives on there: this close sends nothing.
        if handedTo == nil, sendsReset || !sentEnd { sendEnd(reset: sendsReset) }
        loop.execute { [self] in finishClose() }
    }

    /// A client the listener never accepted (it closed): RST (TCP) or EOF (a Unix socket) to
    /// the peer, nothing more received.
    func abandon(reset: Bool = true) {
        isClosed = true
        sendEnd(reset: reset)
    }

    /// A fault: `after` from now the connection is reset, both ways (unless it closed first).
    func injectReset(after delay: Duration) {
        faultTimer = loop.schedule(after: delay) { [self] in
            faultTimer = nil
            guard !isClosed else { return }
            sendEnd(reset: true)
            receiveEnd(UV_ECONNRESET.rawValue)
        }
    }

    // MARK: - transmission

    /// Delivers to the peer after the latency, never before an earlier transmission.
    func transmit(_ bytes: ArraySlice<UInt8>) {
        guard !bytes.isEmpty else { return }
        lastActivity = loop.now.nanoseconds
        // A slice of the writer's immutable array: the packet keeps it, nothing is copied.
        sendPacket(.bytes(bytes))
    }

    func sendEnd(reset: Bool) {
        sentEnd = true
        sendPacket(.end(reset ? UV_ECONNRESET.rawValue : UV_EOF.rawValue))
    }

    func send(_ arrive: @escaping @Sendable (SimulatedStreamEnd) -> Void) {
        sendPacket(.arrive(arrive))
    }

    /// Sends `content` to the peer a drawn latency from now, never before an earlier packet.
    private func sendPacket(_ content: SimulatedPacket.Content) {
        guard let peer else { return }  // the peer's stream is gone: nothing receives
        let now = loop.now.nanoseconds
        let delay = loop.simulatedNetwork?.delay(from: loop, to: peer.loop, latency: latency.clampedNanoseconds)
            ?? latency.clampedNanoseconds
        let arrival = max(now &+ delay, lastArrival)
        lastArrival = arrival
        SimulatedPacket.send(content, at: peer, from: loop, to: peer.loop, after: .nanoseconds(Int64(clamping: arrival - now)))
    }

    /// Runs `body` on `destination` `delay` after now on `source`, as a packet would reach it.
    static func message(from source: EventLoop, to destination: EventLoop, after delay: Duration,
                        _ body: @escaping @Sendable () -> Void) {
        SimulatedPacket.send(.work(body), from: source, to: destination, after: delay)
    }

    func receive(_ bytes: ArraySlice<UInt8>) {
        if let handedTo { return relay(to: handedTo) { $0.receive(bytes) } }
        // Kept from before the stream is attached (bytes sent before the listener accepted).
        guard !isClosed, inboundEnd == nil else { return }
        // Bytes reaching the socket are activity, read or not, as the kernel's record is for TCP
        // and the unread count for a Unix socket: an idle timeout must not close a sending peer.
        lastActivity = loop.now.nanoseconds
        inbound.append(contentsOf: bytes)
        bytesReceived += bytes.count
        queueReadIfReady()
    }

    func receiveEnd(_ code: Int32) {
        if let handedTo { return relay(to: handedTo) { $0.receiveEnd(code) } }
        guard !isClosed else { return }
        if code == UV_ECONNRESET.rawValue {
            // A reset drops what was not read yet, and the next read fails (even after an EOF).
            inbound = []
            inboundStart = 0
            inboundEnd = code
            endDelivered = false
            failBacklog(UV_ECONNRESET.rawValue)
            closePassedIn()
        } else if inboundEnd == nil {
            inboundEnd = code
        }
        queueReadIfReady()
    }

    // MARK: - callbacks of the loop

    func queueReadIfReady() {
        guard reading, !readQueued, inbound.count > inboundStart || (inboundEnd != nil && !endDelivered) else { return }
        readQueued = true
        loop.execute { [self] in readOnce() }
    }

    /// One read, as libuv's read callback: a chunk of what arrived, else the end.
    private func readOnce() {
        readQueued = false
        guard reading, let connection, connection.isHandleOpen else { return }
        let available = inbound.count - inboundStart
        // A read ends where a passed socket came, as a `recvmsg` does at a message with `SCM_RIGHTS`.
        let untilPassed = passedIn.first.map { $0.boundary - bytesRead } ?? available
        if available > 0, untilPassed == 0 {
            // The socket at this point waits for a reader that takes it (`incoming` restarting).
            return connection.deliverSimulatedDescriptors()
        }
        if available > 0 {
            let (base, size) = connection.readBuffer()
            let count = loop.simulatedNetwork?.readSize(min(size, available, untilPassed)) ?? min(size, available, untilPassed)
            bytesRead += count
            inbound.withUnsafeBytes { base.copyMemory(from: $0.baseAddress! + inboundStart, byteCount: count) }
            inboundStart += count
            if inboundStart == inbound.count {
                inbound.removeAll(keepingCapacity: true)
                inboundStart = 0
            }
            lastActivity = loop.now.nanoseconds
            noteRead(UnsafeRawBufferPointer(start: base, count: count), status: 0, by: connection)
            deliver(count, at: base, to: connection)
        } else if let code = inboundEnd, !endDelivered {
            endDelivered = true
            noteRead(UnsafeRawBufferPointer(start: nil, count: 0), status: code, by: connection)
            deliver(Int(code), at: nil, to: connection)
        }
        queueReadIfReady()
    }

    /// Tells the network (the trace's digest, and the timeline when it is kept) what `connection` reads.
    private func noteRead(_ bytes: UnsafeRawBufferPointer, status: Int32, by connection: StreamConnection) {
        guard let network = loop.simulatedNetwork else { return }
        network.noteRead(bytes, status: status)
        network.streamReadObserver?(loop.name, connection.peerDescription, bytes, status)
    }

    /// A read to the stream as libuv's read callback would hand it: ciphertext to the TLS lane, else plain.
    private func deliver(_ count: Int, at base: UnsafeMutableRawPointer?, to connection: StreamConnection) {
        guard connection.bits.tls else { return connection.didRead(count, at: base) }
        var buffer = uv_buf_t(base: base?.assumingMemoryBound(to: CChar.self), len: base == nil ? 0 : count)
        connection.tlsDidRead(count, in: &buffer)
    }

    func finishOldestWrite(status: Int32 = 0) {
        guard !pendingWrites.isEmpty, let connection else { return }
        let write = pendingWrites.removeFirst()
        write._withUnsafeGuaranteedRef { $0.didFinish() }
        connection.writeDidFinish(write, status: status)
    }

    func finishShutdown(status: Int32) {
        guard let request = pendingShutdown, let data = request.request.pointee.data else { return }
        pendingShutdown = nil
        // Balances the retain `start` took, as libuv's callback does.
        Unmanaged<ShutdownRequest>.fromOpaque(data).release()
        request.didFinish()
        request.owner.shutdownDidFinish(request, status: status)
    }

    private func finishClose() {
        while pendingWrites.count > cancelledAtClose { finishOldestWrite() }
        while !pendingWrites.isEmpty { finishOldestWrite(status: UV_ECANCELED.rawValue) }
        finishShutdown(status: UV_ECANCELED.rawValue)
        guard let connection else { return }
        self.connection = nil
        inbound = []
        StreamConnection.finishClose(connection.handle)
    }
}

extension StreamConnection {
    /// Opens this stream over `end` instead of a libuv handle; loop thread only.
    func openSimulated(_ end: SimulatedStreamEnd) {
        assertInEventLoop()
        bits.simulated = true
        end.attach(self)
        extras.simulated = end
        // Nothing of libuv's runs on this memory; leak reports read the handle's type.
        didOpenSimulated(as: transport == .tcp ? UV_TCP : UV_NAMED_PIPE)
    }

    /// `closeHandle()` for a simulated stream: its end runs the close callback as a callback of the loop.
    func closeSimulated() {
        guard handleState == .open, let end = extrasIfMade?.simulated else { return }
        handleState = .closing
        loop.openHandleList.remove(handleCell.memory)
        willClose()
        end.close()
    }
}

/// Connected simulated streams, for the simulated network and its tests.
///
/// Thread rule: each call on its loops' thread (a simulation's driving thread, inside a callback).
package enum SimulatedStreams {
    /// Two connected TCP connections: the first on `first`, the second on `second`, bytes taking
    /// `latency` each way, each with `options`' limits and half-close rule; `names` name each end
    /// for the other's messages.
    package static func tcpPair(
        _ first: EventLoop, _ second: EventLoop, latency: Duration,
        options: TCPOptions = TCPOptions(), names: (String, String) = ("a", "b")
    ) -> (TCPConnection, TCPConnection) {
        let limits = options.limits
        let one = TCPConnection(loop: first, transport: .tcp, limits: limits, origin: "from a simulated pair (\(names.0))")
        let other = TCPConnection(loop: second, transport: .tcp, limits: limits, origin: "from a simulated pair (\(names.1))")
        let oneEnd = SimulatedStreamEnd(loop: first, latency: latency)
        let otherEnd = SimulatedStreamEnd(loop: second, latency: latency)
        SimulatedStreamEnd.connect(oneEnd, otherEnd)
        one.peerDescription = names.1
        other.peerDescription = names.0
        first.performAsSimulatedCallback { one.openSimulated(oneEnd) }
        second.performAsSimulatedCallback { other.openSimulated(otherEnd) }
        return (one, other)
    }
}

internal import CLibUV
import Synchronization

/// One UDP datagram received.
///
/// Thread rule: a value type; safe from any thread.
public struct Datagram: Sendable, Hashable {
    /// The payload (possibly empty).
    public let bytes: [UInt8]
    /// Who sent it, when the system said.
    public let sender: SocketAddress?
    /// Whether the payload was cut to fit the 64 KiB read buffer.
    public let truncated: Bool

    /// Creates a datagram.
    ///
    /// Thread rule: safe from any thread.
    public init(bytes: [UInt8], sender: SocketAddress?, truncated: Bool = false) {
        self.bytes = bytes
        self.sender = sender
        self.truncated = truncated
    }
}

/// UDP sockets; on a simulated loop, sockets of the simulation's network (datagrams on virtual time).
///
/// Thread rule: safe from any thread.
public enum UDP {
    /// Binds a UDP socket to `host:port` and sends it once bound.
    ///
    /// The socket belongs to the subscription: disposing closes it; the signal completes when the
    /// socket closes. Bind errors (`EADDRINUSE`, `EACCES`, `EADDRNOTAVAIL`, an unknown host) fail it.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name ("127.0.0.1", "::", "localhost").
    ///   - port: 0...65535; 0 picks a free port (see `UDPSocket.localAddress`).
    ///   - loop: Where the socket lives; nil for the subscription's home loop.
    ///
    /// Thread rule: safe from any thread.
    public static func bind(host: String = "127.0.0.1", port: Int = 0, on loop: EventLoop? = nil) -> Signal<UDPSocket> {
        boundSocketSignal("UDP.bind", host: host, port: port, on: loop) { handle, subscriber in
            handle.onEnd = { error in
                subscriber.sendEnd(failure: error)
            }
            subscriber.sendNext(UDPSocket(handle))
        }.debugNamed("+UDP.bind(\(host):\(port))")
    }

    /// Binds a UDP socket to `host:port` and sends every datagram it receives; fails on bind or
    /// receive errors; disposing closes it.
    ///
    /// Thread rule: safe from any thread.
    public static func receive(host: String = "127.0.0.1", port: Int, on loop: EventLoop? = nil) -> Signal<Datagram> {
        boundSocketSignal("UDP.receive", host: host, port: port, on: loop) { handle, subscriber in
            handle.onEnd = { error in if let error { subscriber.sendError(error) } }
            _ = handle.startReceiving(subscriber)
        }.debugNamed("+UDP.receive(\(host):\(port))")
    }

    /// Binds a socket per subscription, hands it to `bound` (a bind error ends the subscriber
    /// instead), and closes it when the subscription is disposed.
    private static func boundSocketSignal<Value>(
        _ what: String, host: String, port: Int, on loop: EventLoop?,
        bound: @escaping @Sendable (UDPHandle, Subscriber<Value>) -> Void
    ) -> Signal<Value> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: what) { loop in
                let handle = UDPHandle(loop: loop)
                handle.bind(host: host, port: port) { result in
                    switch result {
                    case .success: bound(handle, subscriber)
                    case .failure(let error): subscriber.sendError(error)
                    }
                }
                return UDPHandle.Disposer(handle)
            }
        }
    }
}

/// A bound UDP socket, handed out by `UDP.bind`.
///
/// Thread rule: every method is safe from any thread; work is done on the socket's loop.
public final class UDPSocket: @unchecked Sendable {
    // Sendable: `handle` and `localAddress` are immutable; the handle's state is confined to its loop thread.
    let handle: UDPHandle

    /// The bound address (with the real port when 0 was asked for).
    public let localAddress: SocketAddress?
    /// The datagrams arriving at the socket; one subscriber at a time (a second gets `EBUSY`).
    /// Fails if receiving fails, completes when the socket closes.
    ///
    /// Thread rule: safe from any thread.
    public let datagrams: Signal<Datagram>

    init(_ handle: UDPHandle) {
        self.handle = handle
        localAddress = handle.localAddress
        datagrams = Signal { subscriber in
            LoopBinding.open(on: handle.loop, for: subscriber, what: "UDPSocket.datagrams") { _ in
                handle.startReceiving(subscriber)
            }
        }.debugNamed("+datagrams")
    }

    /// The loop the socket lives on.
    ///
    /// Thread rule: safe from any thread.
    public var loop: EventLoop { handle.loop }

    /// Sends one datagram to `address`; the signal completes once the kernel took it.
    ///
    /// The send starts now. Fails with the socket's error (`ENETUNREACH`...), `EBADF` once closed,
    /// or `EMSGSIZE` for a payload no datagram can carry (over 65,507 bytes to IPv4, 65,527 to IPv6).
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func send(_ bytes: [UInt8], to address: SocketAddress) -> Signal<Void> {
        let outcome = WriteOutcome()
        let handle = self.handle
        if handle.loop.inEventLoop {
            handle.send(bytes, to: address, outcome: outcome)
        } else {
            do {
                try handle.loop.tryExecute { handle.send(bytes, to: address, outcome: outcome) }
            } catch {
                outcome.finish(error)
            }
        }
        return outcome.signal
    }

    /// Closes the socket: the `datagrams` reader and the `UDP.bind` signal complete. Idempotent.
    ///
    /// Thread rule: safe from any thread.
    public func close() {
        let handle = self.handle
        if handle.loop.inEventLoop {
            handle.end(nil)
        } else {
            // After shutdown the socket is already closed.
            _ = handle.loop.enqueue { handle.end(nil) }
        }
    }
}

/// The `uv_udp_t` behind a `UDPSocket`: the UDP family's backend seam, with `UDPSendRequest`.
/// A second backend provides these members over its in-memory network.
/// Thread rule: loop thread only, except `init` and `loop`.
final class UDPHandle: LoopHandle, SingleReaderSource, @unchecked Sendable {
    /// `SingleReaderSource`'s name for this class.
    typealias TokenSource = UDPHandle

    // Sendable: loop thread only (UDPSocket hops there), except `localAddress`, written before the
    // socket is handed out.
    private(set) var localAddress: SocketAddress?
    /// The `datagrams` reader and its token.
    private var readers = ReaderSlot<HomeGate<Datagram>>()
    private var lookup: (any Disposable)?
    /// Told once when the socket ends: nil for a close, else the error.
    var onEnd: (((any Error)?) -> Void)?
    /// The socket's side of the simulated network, on a simulated loop (from its bind to its close callback).
    var simulated: SimulatedUDPPort?

    init(loop: EventLoop) {
        super.init(loop: loop, byteCount: uv_handle_size(UV_UDP))
    }

    override var label: String { "udp socket on \(localAddress?.description ?? "?")" }

    var udp: UnsafeMutablePointer<uv_udp_t> { pointer(as: uv_udp_t.self) }

    /// Resolves, binds, then calls `completion`.
    func bind(host: String, port: Int, completion: @escaping (Result<Void, any Error>) -> Void) {
        assertInEventLoop()
        lookup = HostResolution.resolve(host, port: port, socketType: SOCK_DGRAM_VALUE, on: loop) { [self] result in
            lookup = nil
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let addresses):
                let address = addresses[0]
                guard loop.acceptsNewHandles else {
                    completion(.failure(EventLoopError.shutDown(loop: loop.name)))
                    return
                }
                if let network = loop.simulatedNetwork {
                    return completion(bindSimulated(address, on: network).map { localAddress = $0 }.mapError { $0 as any Error })
                }
                do {
                    try uvCheck(uv_udp_init(loop.uvLoop, udp), "uv_udp_init")
                    didOpen()
                    try uvCheck(address.withSockaddr { uv_udp_bind(udp, $0, 0) }, "bind to \(address)")
                } catch {
                    closeHandle()
                    completion(.failure(error))
                    return
                }
                localAddress = SocketAddress.read { uv_udp_getsockname(udp, $0, $1) } ?? address
                completion(.success(()))
            }
        }
    }

    func startReceiving(_ subscriber: Subscriber<Datagram>) -> (any Disposable)? {
        assertInEventLoop()
        guard isHandleOpen else {
            subscriber.sendCompleted()
            return nil
        }
        guard readers.reader == nil else {
            subscriber.sendError(UVError(code: UV_EBUSY.rawValue, message: "the socket's datagrams already have a subscriber",
                                         context: "UDPSocket.datagrams on \(localAddress?.description ?? "?")"))
            return nil
        }
        do {
            if let simulated {
                simulated.startReceiving()
            } else {
                try uvCheck(uv_udp_recv_start(udp, udpAllocate, udpReceiveCallback), "uv_udp_recv_start")
            }
        } catch {
            subscriber.sendError(error)
            return nil
        }
        readers.fill(.subscriber(subscriber))
        return ReaderToken(self)
    }

    /// Stops receiving for the reader `token` belongs to (a later reader keeps receiving).
    func stopReading(_ token: ReaderToken<UDPHandle>) {
        assertInEventLoop()
        guard isHandleOpen, readers.currentReaderIsDisposed else { return }
        readers.take()
        if let simulated { return simulated.stopReceiving() }
        uvCheckReporting(uv_udp_recv_stop(udp), "uv_udp_recv_stop")
    }

    fileprivate func didReceive(_ count: Int, _ buffer: UnsafePointer<uv_buf_t>?, _ address: UnsafePointer<sockaddr>?, _ flags: UInt32) {
        if count < 0 {
            end(UVError(code: Int32(count), context: "receiving on \(localAddress?.description ?? "?")"))
            return
        }
        // Zero bytes without an address: nothing more to read now; with one, an empty datagram.
        guard count > 0 || address != nil else { return }
        let datagram = Datagram(bytes: ReadBuffer.copy(buffer?.pointee.base, count: count),
                                sender: address.flatMap { SocketAddress($0) },
                                truncated: flags & UInt32(UV_UDP_PARTIAL.rawValue) != 0)
        readers.reader?.sendNext(datagram)
    }

    func send(_ bytes: [UInt8], to address: SocketAddress, outcome: WriteOutcome) {
        assertInEventLoop()
        guard isHandleOpen else {
            outcome.finish(UVError(code: UV_EBADF.rawValue, message: "the socket is closed", context: "send to \(address)"))
            return
        }
        if let error = UDPHandle.payloadSizeError(bytes.count, to: address) {
            outcome.finish(error)
            return
        }
        if let simulated { return outcome.finish(sendSimulated(bytes, to: address, from: simulated)) }
        // Most datagrams go out at once; only a full socket buffer needs a queued request.
        let sent = bytes.withUnsafeBytes { raw -> Int32 in
            // uv_buf_t counts in size_t; uv_buf_init's unsigned int would trap on 4 GiB and more.
            var buffer = uv_buf_t(base: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)),
                                  len: bytes.count)
            return address.withSockaddr { uv_udp_try_send(udp, &buffer, 1, $0) }
        }
        if sent >= 0 {
            outcome.finish(nil)
            return
        }
        if sent != UV_EAGAIN.rawValue {
            outcome.finish(UVError(code: sent, context: "send to \(address)"))
            return
        }
        let request = UDPSendRequest(loop: loop, payload: bytes, outcome: outcome)
        do {
            try request.start(on: udp, to: address)
        } catch {
            outcome.finish(error)
        }
    }

    /// 65,535 bytes of IP packet less the IP and UDP headers.
    static let largestIPv4Payload = 65_507
    /// 65,535 bytes of UDP length less its header (no jumbograms).
    static let largestIPv6Payload = 65_527

    /// `EMSGSIZE` when no datagram to `address` can carry `count` bytes, checked before libuv sees
    /// the size (a 4 GiB one would trap converting to 32 bits).
    static func payloadSizeError(_ count: Int, to address: SocketAddress) -> UVError? {
        let limit = address.family == .ipv4 ? largestIPv4Payload : largestIPv6Payload
        guard count > limit else { return nil }
        return UVError(code: UV_EMSGSIZE.rawValue,
                       message: "a UDP datagram to an \(address.family == .ipv4 ? "IPv4" : "IPv6") address carries at most \(limit) bytes, not \(count)",
                       context: "send to \(address)")
    }

    /// Closes the socket and tells the reader and the owner. Idempotent.
    func end(_ error: (any Error)?) {
        assertInEventLoop()
        lookup?.dispose()
        lookup = nil
        guard isHandleOpen else { return }
        // The owner and the reader are told after the handle started closing.
        let onEnd = self.onEnd
        self.onEnd = nil
        let reader = readers.take()
        if simulated != nil { closeSimulated() } else { closeHandle() }
        reader?.sendEnd(failure: error)
        onEnd?(error)
    }

    override func closeForShutdown() {
        end(EventLoopError.shutDown(loop: loop.name))
    }

    override func didClose() {
        readers.take()
        onEnd = nil
        simulated = nil
    }

    /// A datagram the simulated network delivered, as `didReceive` hands one to the reader.
    func receivedSimulated(_ datagram: Datagram) {
        readers.reader?.sendNext(datagram)
    }

    /// Closes the handle when the owning subscription is disposed (from any thread).
    final class Disposer: LoopDisposable, @unchecked Sendable {
        // Sendable: `handle` is immutable (its state is touched on its loop only); `disposedFlag` is atomic.
        private let handle: UDPHandle
        let disposedFlag = Atomic<Bool>(false)

        init(_ handle: UDPHandle) { self.handle = handle }

        var loop: EventLoop { handle.loop }

        /// The subscription ended: close the socket without telling the `UDP.bind` subscriber.
        func abandon() {
            handle.onEnd = nil
            handle.end(nil)
        }
    }
}

/// A datagram is read into the loop's read buffer, then copied out (`didReceive`).
private let udpAllocate: uv_alloc_cb = { handle, _, buffer in
    guard let data = handle?.pointee.data, let buffer else { return }
    // Borrowed: `data` holds the handle's retain until its close callback.
    let base = Unmanaged<UDPHandle>.fromOpaque(data)._withUnsafeGuaranteedRef { $0.loop.readBuffer }
    buffer.pointee = uv_buf_t(base: base.assumingMemoryBound(to: CChar.self), len: ReadBuffer.size)
}

private let udpReceiveCallback: uv_udp_recv_cb = { handle, count, buffer, address, flags in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<UDPHandle>.fromOpaque(data).takeUnretainedValue().didReceive(count, buffer, address, flags)
}

/// One `uv_udp_send_t` for a datagram the socket could not send at once.
final class UDPSendRequest: LoopRequest {
    // Loop thread only.
    private let payload: [UInt8]
    private let outcome: WriteOutcome

    init(loop: EventLoop, payload: [UInt8], outcome: WriteOutcome) {
        self.payload = payload
        self.outcome = outcome
        super.init(loop: loop, type: UV_UDP_SEND)
    }

    override var label: String { "udp send of \(payload.count) bytes" }

    func start(on udp: UnsafeMutablePointer<uv_udp_t>, to address: SocketAddress) throws(UVError) {
        let request = pointer(as: uv_udp_send_t.self)
        // Held by this request until libuv calls back, and never mutated.
        let base = payload.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress) }
        // The size was checked by `UDPHandle.payloadSizeError`; uv_buf_t counts in size_t.
        var buffer = uv_buf_t(base: base?.assumingMemoryBound(to: CChar.self), len: payload.count)
        try start("send to \(address)") {
            address.withSockaddr { uv_udp_send(request, udp, &buffer, 1, $0, udpSendCallback) }
        }
    }

    /// Closing the socket ends a pending send (ECANCELED); nothing to cancel here.
    override func cancelForShutdown() {}

    fileprivate func finish(status: Int32) {
        didFinish()
        outcome.finish(status < 0 ? UVError(code: status, context: "udp send") : nil)
    }
}

private let udpSendCallback: uv_udp_send_cb = { request, status in
    guard let data = request?.pointee.data else { return }
    Unmanaged<UDPSendRequest>.fromOpaque(data).takeRetainedValue().finish(status: status)
}

internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A TCP stream's two addresses, read from the socket the first time someone asks and kept from then on.
///
/// Made on the first request (an idle connection nobody asks about has none), from any thread.
/// An entry once read never changes: the socket's addresses are fixed while it is connected,
/// and a socket that could not be read (closed, or no longer connected) never becomes readable.
final class TCPAddressCache: @unchecked Sendable {
    // `lock` guards `local`, `peer` and `peerText`; the lock is never held across a call out.
    private let lock = SpinLock()
    private var local = Entry.unread
    private var peer = Entry.unread
    /// `peer`'s description, formatted once.
    private var peerText: String?

    private enum Entry {
        case unread
        case read(SocketAddress?)
    }

    /// The kept address, or `.unread`.
    func cached(peer wantsPeer: Bool) -> SocketAddress?? {
        lock.withLock {
            switch wantsPeer ? peer : local {
            case .unread: nil
            case .read(let address): .some(address)
            }
        }
    }

    /// Keeps `address` unless another thread kept one first; returns the one kept.
    func keep(_ address: SocketAddress?, peer wantsPeer: Bool) -> SocketAddress? {
        lock.withLock {
            let entry = wantsPeer ? peer : local
            if case .read(let earlier) = entry { return earlier }
            if wantsPeer { peer = .read(address) } else { local = .read(address) }
            return address
        }
    }

    /// The peer's description kept by `keepPeerText`, if any.
    var keptPeerText: String? { lock.withLock { peerText } }

    /// Keeps the peer's description (formatted outside the lock) unless one was kept first.
    func keepPeerText(_ text: String) -> String {
        lock.withLock {
            if let peerText { return peerText }
            peerText = text
            return text
        }
    }
}

/// What only a TCP stream has: addresses and TCP's socket options. The rest is the stream core (`StreamConnection`).
///
/// Addresses are read on demand: nothing is asked of the kernel at accept or connect. The first
/// `address(peer:)` reads the socket (`getsockname`, `getpeername`, from any thread) and the
/// cache keeps the answer. A read from another thread races with the loop closing the socket
/// (and the descriptor's number being reused by a new socket); it is made safe without a lock
/// held across the system call: the loop marks the stream closed (`openState` replaces the
/// descriptor with an end code, sequentially consistent) before `uv_close` closes the descriptor, and a reader checks the
/// mark before its system call and again after it, behind a full fence. When the second check
/// sees the stream open, the close had not begun when the system call ran, so the answer
/// belongs to this connection; otherwise it is dropped (nil).
extension StreamConnection {
    var tcp: UnsafeMutablePointer<uv_tcp_t> { pointer(as: uv_tcp_t.self) }

    /// Applies the options once connected or accepted, and notes the descriptor the addresses are read from.
    func didConnectTCP(options: TCPOptions) {
        // A simulated stream has no socket: its addresses are kept already, its options mean nothing.
        if bits.simulated { return }
        var descriptor = uv_os_fd_t()
        if uv_fileno(handle, &descriptor) == 0, descriptor >= 0, isHandleOpen { openState.store(descriptor, ordering: .releasing) }
        // Nobody can receive an error here; the connection still works without the option.
        // The messages are composed only if the call fails (`uvCheckReporting` takes an autoclosure).
        if options.noDelay { uvCheckReporting(uv_tcp_nodelay(tcp, 1), "uv_tcp_nodelay on \(peerDescription)") }
        if let delay = options.keepAlive {
            uvCheckReporting(uv_tcp_keepalive(tcp, 1, keepAliveSeconds(delay)), "uv_tcp_keepalive on \(peerDescription)")
        }
    }

    /// Keeps a simulated stream's two addresses, as a socket's would be read (it has no descriptor).
    func keepSimulatedAddresses(local: SocketAddress, peer: SocketAddress) {
        let cache = addressCache
        _ = cache.keep(local, peer: false)
        _ = cache.keep(peer, peer: true)
    }

    /// This end's address (`peer` false) or the other end's, read on the first request and kept.
    ///
    /// nil when it cannot be read: the connection closed before anyone asked, or (for the peer)
    /// the socket no longer has one. A peer that reset the connection still has its address read
    /// (`SO_PEERNAME`, which the kernel answers after a reset where `getpeername` does not), as
    /// long as the socket is open; an error that ends the connection names the peer in its
    /// message, so the address is read (and kept) before the socket closes.
    ///
    /// Thread rule: safe from any thread; never waits for the loop.
    func address(peer wantsPeer: Bool) -> SocketAddress? {
        let cache = addressCache
        if let kept = cache.cached(peer: wantsPeer) { return kept }
        switch readAddress(peer: wantsPeer) {
        case .notConnected: return nil  // nothing kept: a request once connected reads the socket
        case .read(let address): return cache.keep(address, peer: wantsPeer)
        }
    }

    /// The cache, made on the first request.
    private var addressCache: TCPAddressCache {
        let extras = self.extras
        if let cache = extras.tcpAddresses.load() { return cache }
        return extras.tcpAddresses.storeIfNil(TCPAddressCache())
    }

    /// `"10.0.0.2:5000"`, or nil when the peer's address cannot be read.
    var tcpPeerText: String? {
        let cache = addressCache
        if let text = cache.keptPeerText { return text }
        guard let peer = address(peer: true) else { return nil }
        return cache.keepPeerText(peer.description)
    }

    private enum AddressRead {
        /// No descriptor yet (a connect in progress).
        case notConnected
        /// The answer, final: nil when the socket could not say (closed, or no longer connected).
        case read(SocketAddress?)
    }

    /// One read of the socket, validated against the loop's close (see the extension's comment).
    private func readAddress(peer wantsPeer: Bool) -> AddressRead {
        let descriptor = openState.load(ordering: .acquiring)
        guard descriptor != OpenState.openCode else { return .notConnected }
        guard descriptor >= 0 else { return .read(nil) }  // closed
        var storage = sockaddr_storage()
        let answered = withUnsafeMutablePointer(to: &storage) { pointer -> Bool in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
                if !wantsPeer { return getsockname(descriptor, address, &length) == 0 }
                if getpeername(descriptor, address, &length) == 0 { return true }
                guard errno == ENOTCONN else { return false }
                // After a reset SO_PEERNAME still answers, for a length no longer than the address's own.
                for size in [MemoryLayout<sockaddr_in6>.size, MemoryLayout<sockaddr_in>.size] {
                    length = socklen_t(size)
                    if getsockopt(descriptor, SOL_SOCKET, SO_PEERNAME, address, &length) == 0 { return true }
                }
                return false
            }
        }
        // Pairs with the sequentially consistent mark in `recordEnd`, made before `uv_close`.
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        guard answered, openState.load(ordering: .relaxed) >= 0 else { return .read(nil) }
        return .read(withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) }
        })
    }

    func applyNoDelay(_ enabled: Bool) throws(UVError) {
        assertInEventLoop()
        guard isHandleOpen else { throw closedError("setNoDelay") }
        if bits.simulated { return }  // nothing to tune on the simulated network
        try uvCheck(uv_tcp_nodelay(tcp, enabled ? 1 : 0), "uv_tcp_nodelay")
    }

    func applyKeepAlive(_ delay: Duration?) throws(UVError) {
        assertInEventLoop()
        guard isHandleOpen else { throw closedError("setKeepAlive") }
        // Checked first: libuv turns SO_KEEPALIVE on before the delay is refused.
        if let refusal = TCPOptions.keepAliveRefusal(delay, option: "the keep-alive delay", context: "setKeepAlive on \(peerDescription)") {
            throw refusal
        }
        if bits.simulated { return }
        try uvCheck(uv_tcp_keepalive(tcp, delay == nil ? 0 : 1, delay.map(keepAliveSeconds) ?? 0), "uv_tcp_keepalive")
    }

    private func keepAliveSeconds(_ delay: Duration) -> UInt32 {
        UInt32(clamping: max(1, delay.components.seconds))
    }
}

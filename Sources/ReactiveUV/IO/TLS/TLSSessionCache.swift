internal import COpenSSL

/// A client configuration's sessions to resume, one per server (its name, address and port): a
/// TLS 1.3 ticket or a TLS 1.2 session, kept when the server sends it and taken by the next
/// connection to the same server. A TLS 1.3 ticket is used once (a resumed connection gets new
/// ones); the oldest server is forgotten past `capacity`.
///
/// Thread rule: safe from any thread (connections on every loop share one configuration).
final class TLSSessionCache: Sendable {
    private struct Entries {
        var byServer: [String: OpaquePointer] = [:]
        /// Servers, oldest first, for eviction.
        var order: [String] = []
    }

    private let capacity: Int
    // Each `SSL_SESSION` held here owns one reference, released when it is replaced, taken or evicted.
    private let entries = LockedValue(Entries())

    init(capacity: Int) { self.capacity = capacity }

    deinit {
        let held = entries.withLock { Array($0.byServer.values) }
        held.forEach { SSL_SESSION_free($0) }
    }

    /// Keeps `session` (whose reference the cache now owns) for `server`, replacing what it had.
    func store(_ session: OpaquePointer, for server: String) {
        let released: [OpaquePointer] = entries.withLock { entries in
            var released: [OpaquePointer] = []
            if let old = entries.byServer.updateValue(session, forKey: server) {
                released.append(old)
                entries.order.removeAll { $0 == server }
            }
            entries.order.append(server)
            while entries.order.count > capacity {
                let oldest = entries.order.removeFirst()
                if let evicted = entries.byServer.removeValue(forKey: oldest) { released.append(evicted) }
            }
            return released
        }
        // Freed outside the lock: OpenSSL is never called under it.
        released.forEach { SSL_SESSION_free($0) }
    }

    /// The session kept for `server`, taken out (its reference is the caller's), or nil.
    func take(for server: String) -> OpaquePointer? {
        entries.withLock { entries in
            guard let session = entries.byServer.removeValue(forKey: server) else { return nil }
            entries.order.removeAll { $0 == server }
            return session
        }
    }
}

/// The client's new-session callback: a session or ticket the server sent is kept for the server
/// its connection was made to (returning 1: the cache took OpenSSL's reference).
let clientSessionArrived: @convention(c) (OpaquePointer?, OpaquePointer?) -> Int32 = { ssl, session in
    guard let ssl, let session, let owner = SSL_get_ex_data(ssl, 0) else { return 0 }
    let tlsSession = Unmanaged<TLSSession>.fromOpaque(owner).takeUnretainedValue()
    guard let key = tlsSession.resumptionKey, let cache = tlsSession.context.sessionCache,
          SSL_SESSION_is_resumable(session) == 1 else { return 0 }
    cache.store(session, for: key)
    return 1
}

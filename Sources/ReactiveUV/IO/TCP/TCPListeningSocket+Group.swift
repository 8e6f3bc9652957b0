#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A TCP server on a group (`TCPServer.serve(on: group)`): a socket per loop, every share accepting.
///
/// The coordinator resolves the host and binds one `SO_REUSEPORT` socket per loop (`ReusePortSocket`),
/// all listening before `.listening` is sent; each loop then adopts its socket in a share of its own,
/// through its queue, and accepts the clients the kernel hashes onto it. Why one socket per loop rather
/// than one loop accepting for the others: see docs/INTERNALS.md, "Serving on a group".
extension TCPListeningSocket {
    /// Resolves `host` (at once when numeric), then binds and starts every loop's share.
    ///
    /// Thread rule: the coordinator's loop thread.
    static func startShares(of server: GroupServer<TCPListeningSocket>, host: String, port: Int) {
        let lookup = HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: server.coordinator) { result in
            switch result {
            case .success(let addresses): bindShares(of: server, to: addresses[0])
            case .failure(let error): server.fail(error)
            }
        }
        if let lookup, !server.keepLookup(lookup) { lookup.dispose() }
    }

    /// Binds a socket per loop, says `.listening`, and hands each loop its socket.
    private static func bindShares(of server: GroupServer<TCPListeningSocket>, to address: SocketAddress) {
        let loops = server.group.loops
        let descriptors: [Int32]
        let bound: SocketAddress
        do {
            (descriptors, bound) = try ReusePortSocket.bindAll(count: loops.count, to: address, backlog: server.backlog.value)
        } catch {
            server.fail(error)
            return
        }
        let shares = loops.indices.map { index in
            server.makeShare(TCPListeningSocket(loop: loops[index], source: .descriptor(descriptors[index], bound),
                                                backlog: server.backlog, options: server.options))
        }
        guard server.beginServing(shares) else {
            for descriptor in descriptors { Glibc.close(descriptor) }
            return
        }
        // Sent before any loop adopts its socket, so it reaches the subscriber before any `.accepted`
        // (which a loop sends only after its start, queued after this send). Every socket listens
        // already: a client connecting now is queued, not refused.
        server.send(.listening(bound))
        for (share, descriptor) in zip(shares, descriptors) {
            server.start(share, refused: { Glibc.close(descriptor) })
        }
    }
}

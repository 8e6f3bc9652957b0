internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Listening sockets that share one address through `SO_REUSEPORT`: one per loop of a group.
///
/// libuv 1.44 has no reuse-port flag for `uv_tcp_bind`, so the sockets are made and bound
/// here with plain system calls, then each loop adopts one with `uv_tcp_open`. The kernel
/// hashes each new connection (by its address pair) onto one of the listening sockets.
///
/// Any thread: no libuv call, no loop state.
enum ReusePortSocket {
    /// Makes `count` sockets bound to `address` with `SO_REUSEADDR` and `SO_REUSEPORT`, each listening.
    ///
    /// Port 0 binds the first socket to a free port and the rest to that port. For a given
    /// port, a probe socket without `SO_REUSEPORT` is bound first: it fails with `EADDRINUSE`
    /// when anyone listens there (a server without `SO_REUSEPORT`, or another group
    /// listener, which would otherwise share the port silently and take part of its clients).
    ///
    /// - Returns: The descriptors (non-blocking, close-on-exec; the caller owns them) and the bound address.
    /// - Throws: `UVError` naming the call and the address; every descriptor made is closed first.
    static func bindAll(count: Int, to address: SocketAddress, backlog: Int32) throws(UVError) -> ([Int32], SocketAddress) {
        if address.port != 0 { try probeFree(address) }
        var descriptors: [Int32] = []
        var bound = address
        do throws(UVError) {
            for _ in 0..<count {
                let descriptor = try makeSocket(family: address.family, reusePort: true, for: address)
                descriptors.append(descriptor)
                try bind(descriptor, to: bound)
                if bound.port == 0 {
                    guard let named = localAddress(of: descriptor) else {
                        throw UVError(code: -errno, context: "getsockname after binding \(address)")
                    }
                    bound = named
                }
                // Listening at once: from here the kernel queues clients hashed onto this socket
                // until its loop adopts it and accepts them (nobody is refused in between).
                guard Glibc.listen(descriptor, backlog) == 0 else {
                    throw UVError(code: -errno, context: "listen on \(bound)")
                }
            }
        } catch {
            for descriptor in descriptors { Glibc.close(descriptor) }
            throw error
        }
        return (descriptors, bound)
    }

    /// Fails with a clear `EADDRINUSE` when a socket without `SO_REUSEPORT` cannot bind `address`.
    private static func probeFree(_ address: SocketAddress) throws(UVError) {
        let probe = try makeSocket(family: address.family, reusePort: false, for: address)
        defer { Glibc.close(probe) }
        do throws(UVError) {
            try bind(probe, to: address)
        } catch {
            guard error.code == UVError.addressInUseCode else { throw error }
            throw UVError(code: error.code,
                          message: "\(address) is in use: another socket listens on that port (a group listener shares a port only among its own loops, never with another server)",
                          context: "TCPServer.listen(on: group) at \(address)")
        }
    }

    private static func makeSocket(family: SocketAddress.Family, reusePort: Bool, for address: SocketAddress) throws(UVError) -> Int32 {
        let domain = family == .ipv4 ? AF_INET : AF_INET6
        let descriptor = socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw UVError(code: -errno, context: "socket() for \(address)") }
        var on: Int32 = 1
        let length = socklen_t(MemoryLayout<Int32>.size)
        // SO_REUSEADDR as libuv's uv_tcp_bind sets it: a restarted server binds despite TIME_WAIT.
        var result = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, length)
        if result == 0 && reusePort { result = setsockopt(descriptor, SOL_SOCKET, SO_REUSEPORT, &on, length) }
        guard result == 0 else {
            let code = -errno
            Glibc.close(descriptor)
            throw UVError(code: code, context: "setsockopt(\(reusePort ? "SO_REUSEPORT" : "SO_REUSEADDR")) for \(address)")
        }
        return descriptor
    }

    private static func bind(_ descriptor: Int32, to address: SocketAddress) throws(UVError) {
        let length = socklen_t(address.family == .ipv4 ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        let result = address.withSockaddr { Glibc.bind(descriptor, $0, length) }
        guard result == 0 else { throw address.explaining(UVError(code: -errno, context: "bind to \(address)")) }
    }

    private static func localAddress(of descriptor: Int32) -> SocketAddress? {
        SocketAddress.read { address, length in
            var size = socklen_t(length.pointee)
            defer { length.pointee = Int32(size) }
            return getsockname(descriptor, address, &size) == 0 ? 0 : -errno
        }
    }
}

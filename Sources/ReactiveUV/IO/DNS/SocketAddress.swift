internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An IPv4 or IPv6 address with a port, in numeric form ("127.0.0.1:8080", "[::1]:8080"); resolve
/// host names with `DNS.resolve(_:port:on:)` (the TCP and UDP factories do it for you).
///
/// Thread rule: a value type; safe from any thread.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address family.
    public enum Family: Sendable, Hashable {
        /// IPv4 (`AF_INET`).
        case ipv4
        /// IPv6 (`AF_INET6`).
        case ipv6
    }

    /// The numeric host ("127.0.0.1", "::1"); a link-local IPv6 address keeps its interface ("fe80::1%eth0").
    public let host: String
    /// The port, 0...65535 (0 asks the system for a free port when binding).
    public let port: Int
    /// IPv4 or IPv6.
    public let family: Family

    /// Parses a numeric IPv4 or IPv6 host and a port.
    ///
    /// - Parameters:
    ///   - host: A numeric address such as "127.0.0.1", "::1" or "fe80::1%eth0" (no host names).
    ///   - port: 0...65535.
    /// - Throws: `UVError` (`EINVAL`) when the host is not a numeric address, its zone (after `%`)
    ///   names no network interface, or the port is out of range.
    ///
    /// Thread rule: safe from any thread.
    public init(host: String, port: Int) throws(UVError) {
        guard (0...65_535).contains(port) else {
            throw UVError(code: UVError.invalidArgumentCode, message: "port must be in 0...65535, got \(port)",
                          context: "SocketAddress(\(host), \(port))")
        }
        guard let family = SocketAddress.numericFamily(of: host) else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "'\(host)' is not a numeric IPv4 or IPv6 address",
                          context: "SocketAddress(\(host), \(port))")
        }
        // libuv ignores a zone that names no interface: the bind or connect would fail with a bare EINVAL.
        if family == .ipv6, let percent = host.firstIndex(of: "%") {
            let zone = String(host[host.index(after: percent)...])
            guard if_nametoindex(zone) != 0 else {
                throw UVError(code: UVError.invalidArgumentCode,
                              message: "'\(host)' names no network interface after its '%' (a link-local address needs one that exists, such as eth0)",
                              context: "SocketAddress(\(host), \(port))")
            }
        }
        self.host = host
        self.port = port
        self.family = family
    }

    /// Reads a `sockaddr_in` or `sockaddr_in6`; nil for any other family.
    init?(_ address: UnsafePointer<sockaddr>) {
        var name = [CChar](repeating: 0, count: 64)
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let ipv4 = UnsafeRawPointer(address).assumingMemoryBound(to: sockaddr_in.self)
            guard uv_ip4_name(ipv4, &name, name.count) == 0 else { return nil }
            port = Int(UInt16(bigEndian: ipv4.pointee.sin_port))
            family = .ipv4
        case AF_INET6:
            let ipv6 = UnsafeRawPointer(address).assumingMemoryBound(to: sockaddr_in6.self)
            guard uv_ip6_name(ipv6, &name, name.count) == 0 else { return nil }
            port = Int(UInt16(bigEndian: ipv6.pointee.sin6_port))
            family = .ipv6
            // uv_ip6_name leaves the interface out of a link-local address: append it ("fe80::1%eth0") so
            // the address a server reports can be bound and connected to again.
            let scope = ipv6.pointee.sin6_scope_id
            if scope != 0 {
                var interface = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
                let length = name.firstIndex(of: 0) ?? name.count
                if if_indextoname(scope, &interface) != nil {
                    name.replaceSubrange(length..., with: [CChar(UInt8(ascii: "%"))] + interface)
                }
            }
        default:
            return nil
        }
        host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `"127.0.0.1:8080"` or `"[::1]:8080"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    static func numericFamily(of host: String) -> Family? {
        var ipv4 = sockaddr_in()
        if uv_ip4_addr(host, 0, &ipv4) == 0 { return .ipv4 }
        var ipv6 = sockaddr_in6()
        if uv_ip6_addr(host, 0, &ipv6) == 0 { return .ipv6 }
        return nil
    }

    /// Runs `body` with this address as a `sockaddr` (a `sockaddr_in` or `sockaddr_in6`).
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>) -> R) -> R {
        var storage = sockaddr_storage()
        return withUnsafeMutablePointer(to: &storage) { pointer in
            let raw = UnsafeMutableRawPointer(pointer)
            // The host was validated in init, so these parse.
            switch family {
            case .ipv4:
                _ = uv_ip4_addr(host, Int32(port), raw.assumingMemoryBound(to: sockaddr_in.self))
            case .ipv6:
                _ = uv_ip6_addr(host, Int32(port), raw.assumingMemoryBound(to: sockaddr_in6.self))
            }
            return body(raw.assumingMemoryBound(to: sockaddr.self))
        }
    }

    /// `error` explained when it is the bare `EINVAL` Linux gives a link-local IPv6 address without
    /// its interface; else `error` itself.
    func explaining(_ error: UVError) -> UVError {
        guard error.code == UVError.invalidArgumentCode, family == .ipv6, !host.contains("%") else { return error }
        let linkLocal = withSockaddr { address in
            UnsafeRawPointer(address).assumingMemoryBound(to: sockaddr_in6.self).withMemoryRebound(to: UInt8.self, capacity: 24) {
                // fe80::/10: the address's first byte (after family, port and flow info, at offset 8).
                $0[8] == 0xfe && $0[9] & 0xc0 == 0x80
            }
        }
        guard linkLocal else { return error }
        return UVError(code: error.code,
                       message: "\(host) is a link-local IPv6 address, which needs its interface: write it as \(host)%eth0 (the interface's name)",
                       context: error.context)
    }

    /// Reads a TCP handle's local or peer address through `uv_tcp_getsockname`/`uv_tcp_getpeername`.
    static func read(
        _ reader: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<Int32>) -> Int32
    ) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &storage) { pointer in
            let address = UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: sockaddr.self)
            guard reader(address, &length) == 0 else { return nil }
            return SocketAddress(address)
        }
    }
}

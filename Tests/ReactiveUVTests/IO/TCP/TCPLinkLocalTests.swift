import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Link-local IPv6 addresses (fe80::/10), which mean something only with their interface ("fe80::1%eth0").
final class TCPLinkLocalTests: XCTestCase {
    /// A server on a scoped link-local address reports it with its zone, so the address it names can
    /// be connected to; a group binds every loop's socket to it. Without the zone, `.listening` would
    /// name an address nobody can connect to (`EINVAL`), and a group on port 0 would fail binding its
    /// second socket to the unscoped address read from the first.
    func testAServerOnAScopedLinkLocalAddressReportsItWithItsZone() throws {
        guard let local = Self.linkLocalAddress() else {
            throw XCTSkip("no interface here has a link-local IPv6 address (fe80::/10)")
        }
        let group = EventLoopGroup(loopCount: 2, name: "link-local")
        defer { group.shutdown() }
        let harness = LoopHarness()
        defer { XCTAssertTrue(harness.finish().isClean) }

        let single = try harness.record(TCPServer.serve(host: local, port: 0), label: "one loop")
        let grouped = try harness.record(TCPServer.serve(host: local, port: 0, on: group), label: "group")
        for server in [single, grouped] {
            guard case .listening(let address)? = try server.waitForValues(1).first else {
                return XCTFail("\(server.events)")
            }
            XCTAssertEqual(address.host, local, "the zone is part of the address reported")
            XCTAssertEqual(address.description, "[\(local)]:\(address.port)")
            let client = try harness.record(TCP.connect(host: address.host, port: address.port), label: "client")
            let connection = try client.waitForValues(1)[0]
            XCTAssertEqual(connection.peerAddress?.host, local)
            try server.wait(for: "the client accepted", until: { $0.contains { if case .next(.accepted) = $0 { true } else { false } } })
            connection.reset()
        }
    }

    /// A link-local address without its interface is `EINVAL` saying so (it was a bare "invalid
    /// argument"), for a server on one loop or a group and for a client; a zone naming no interface
    /// is `EINVAL` from `SocketAddress` (libuv ignores such a zone without a word).
    func testALinkLocalAddressWithoutItsInterfaceIsEINVALSayingSo() throws {
        let probe = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { throw XCTSkip("this kernel makes no IPv6 socket (errno \(errno)): no link-local address to refuse") }
        close(probe)
        let group = EventLoopGroup(loopCount: 2, name: "link-local")
        defer { group.shutdown() }
        let harness = LoopHarness()
        defer { XCTAssertTrue(harness.finish().isClean) }
        let attempts: [Signal<String>] = [
            TCPServer.serve(host: "fe80::1", port: 0).map { "\($0)" },
            TCPServer.serve(host: "fe80::1", port: 0, on: group).map { "\($0)" },
            TCP.connect(host: "fe80::1", port: 80).map { "\($0)" },
        ]
        for attempt in attempts {
            let recorder = try harness.record(attempt)
            let error = try XCTUnwrap(recorder.waitForTermination().error as? UVError, "\(recorder.events)")
            XCTAssertEqual(error.name, "EINVAL")
            XCTAssertTrue(error.message.contains("fe80::1 is a link-local IPv6 address, which needs its interface"), error.message)
        }
        XCTAssertThrowsError(try SocketAddress(host: "fe80::1%no-such-interface", port: 80)) { error in
            XCTAssertEqual((error as? UVError)?.name, "EINVAL")
            XCTAssertTrue("\(error)".contains("names no network interface"), "\(error)")
        }
    }

    /// The first link-local IPv6 address of an interface that is up, with its zone ("fe80::1%eth0").
    private static func linkLocalAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr, Int32(address.pointee.sa_family) == AF_INET6,
                  entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            let ipv6 = UnsafeRawPointer(address).assumingMemoryBound(to: sockaddr_in6.self)
            var bytes = ipv6.pointee.sin6_addr
            let linkLocal = withUnsafeBytes(of: &bytes) { $0[0] == 0xfe && $0[1] & 0xc0 == 0x80 }
            guard linkLocal else { continue }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, &bytes, &text, socklen_t(text.count)) != nil else { continue }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "%" + String(cString: entry.pointee.ifa_name)
        }
        return nil
    }
}

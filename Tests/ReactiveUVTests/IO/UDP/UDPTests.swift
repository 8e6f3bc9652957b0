import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

final class UDPTests: XCTestCase {
    func testDatagramsTravelBetweenTwoSocketsWithTheirSender() throws {
        try checked { harness in
            let a = try harness.record(UDP.bind(), label: "a").waitForValues(1)[0]
            let b = try harness.record(UDP.bind(), label: "b").waitForValues(1)[0]
            let bAddress = try XCTUnwrap(b.localAddress)
            XCTAssertEqual(bAddress.host, "127.0.0.1")
            XCTAssertNotEqual(bAddress.port, 0, "the real port is reported")

            let received = try harness.record(b.datagrams)
            for (index, payload) in [[UInt8]([1, 2, 3]), [], bytePattern(60_000, seed: 7)].enumerated() {
                XCTAssertTrue(try harness.record(a.send(payload, to: bAddress)).waitForTermination().isCompleted)
                let datagram = try received.waitForValues(index + 1)[index]
                XCTAssertTrue(datagram.bytes == payload, "datagram \(index)")
                XCTAssertEqual(datagram.sender, a.localAddress)
                XCTAssertFalse(datagram.truncated)
            }
        }
    }

    func testReceiveBindsAndDelivers() throws {
        try checked { harness in
            let port = try unusedUDPPort()
            let received = try harness.record(UDP.receive(port: port))
            let sender = try harness.record(UDP.bind()).waitForValues(1)[0]
            try harness.record(sender.send(Array("ping".utf8), to: try SocketAddress(host: "127.0.0.1", port: port))).waitForTermination()
            XCTAssertEqual(try received.waitForValues(1)[0].bytes, Array("ping".utf8))
        }
    }

    func testBindErrorsAndBadInput() throws {
        try checked { harness in
            let first = try harness.record(UDP.bind()).waitForValues(1)[0]
            let port = try XCTUnwrap(first.localAddress?.port)
            let second = try harness.record(UDP.bind(port: port))
            try second.waitForTermination()
            XCTAssertEqual(errorName(second), "EADDRINUSE")

            let unknown = try harness.record(UDP.bind(host: "no-such-host.invalid"))
            try unknown.waitForTermination()
            XCTAssertTrue(errorName(unknown)?.hasPrefix("EAI_") == true, "\(String(describing: unknown.terminal))")

            let tooBig = try harness.record(first.send([UInt8](repeating: 0, count: 70_000), to: try SocketAddress(host: "127.0.0.1", port: port)))
            try tooBig.waitForTermination()
            XCTAssertEqual(errorName(tooBig), "EMSGSIZE")
        }
    }

    /// A payload no datagram can carry is refused before libuv sees its size, with the size and the limit
    /// named (libuv's plain "message too long" named neither, and 4 GiB or more trapped converting it to 32 bits).
    func testAPayloadNoDatagramCanCarryIsEMSGSIZENamingTheLimit() throws {
        try checked { harness in
            let socket = try harness.record(UDP.bind()).waitForValues(1)[0]
            let address = try XCTUnwrap(socket.localAddress)
            let received = try harness.record(socket.datagrams)
            let tooBig = try harness.record(socket.send(bytePattern(65_508, seed: 1), to: address))
            let error = try XCTUnwrap(try tooBig.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EMSGSIZE")
            XCTAssertTrue(error.message.contains("65507") && error.message.contains("65508"), error.description)

            let largest = bytePattern(65_507, seed: 2)
            XCTAssertTrue(try harness.record(socket.send(largest, to: address)).waitForTermination().isCompleted)
            XCTAssertTrue(try received.waitForValues(1)[0].bytes == largest, "the largest IPv4 payload goes through")
        }
        let ipv6 = try SocketAddress(host: "::1", port: 9)
        XCTAssertNil(UDPHandle.payloadSizeError(65_527, to: ipv6))
        XCTAssertEqual(UDPHandle.payloadSizeError(65_528, to: ipv6)?.name, "EMSGSIZE")
        let huge = try XCTUnwrap(UDPHandle.payloadSizeError(5 << 30, to: try SocketAddress(host: "127.0.0.1", port: 9)))
        XCTAssertTrue(huge.message.contains("\(5 << 30)"), huge.description)
    }

    /// A 5 GiB payload through the public path (an array whose pages are never touched): an EMSGSIZE error
    /// event, not a trap on the loop thread converting the size to 32 bits.
    func testAFiveGiBPayloadIsAnErrorNotATrap() throws {
        let count = 5 << 30
        // Only where the system would grant the address space: the array's pages are never touched.
        let probe = mmap(nil, count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let probe, probe != MAP_FAILED else { throw XCTSkip("the system would not grant \(count) bytes of address space") }
        munmap(probe, count)
        let huge = [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
        try checked { harness in
            let socket = try harness.record(UDP.bind()).waitForValues(1)[0]
            let send = try harness.record(socket.send(huge, to: try XCTUnwrap(socket.localAddress)))
            XCTAssertEqual((try send.waitForTermination().error as? UVError)?.name, "EMSGSIZE")
        }
    }

    func testASecondReaderIsRefusedAndClosingCompletesEverything() throws {
        try checked { harness in
            let bound = try harness.record(UDP.bind())
            let socket = try bound.waitForValues(1)[0]
            let reader = try harness.record(socket.datagrams, label: "reader")
            let second = try harness.record(socket.datagrams, label: "second")
            try second.waitForTermination()
            XCTAssertEqual(errorName(second), "EBUSY")
            socket.close()
            XCTAssertTrue(try reader.waitForTermination().isCompleted)
            XCTAssertTrue(try bound.waitForTermination().isCompleted)
            let late = try harness.record(socket.send([1], to: try XCTUnwrap(socket.localAddress)))
            try late.waitForTermination()
            XCTAssertEqual(errorName(late), "EBADF")
        }
    }

    private func unusedUDPPort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard ok else { throw TestFailure("bind failed: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

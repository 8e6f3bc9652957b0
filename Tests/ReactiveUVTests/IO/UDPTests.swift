import Foundation
import ReactiveUV
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
            for (index, payload) in [[UInt8]([1, 2, 3]), [], pattern(60_000, seed: 7)].enumerated() {
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

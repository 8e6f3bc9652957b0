import CTestSupport
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import Synchronization
import XCTest

/// What an accepted Unix-socket connection costs while it sits idle: as a TCP listener's do
/// (`TCPIdleMemoryTests`), its connections share the listener's origin, which also names the
/// socket path as their peer, so none composes a label or keeps a name (nor the extras a name
/// of its own would make).
final class UnixIdleMemoryTests: XCTestCase {
    /// Counts the server's events without keeping them (a recorder's array would cost per connection too).
    private final class ServerCounts: Sendable {
        let listening = Atomic<Bool>(false)
        let accepted = Atomic<Int>(0)
    }

    /// Two accepted connections that have echoed a message made no extras and share one origin;
    /// each still names the socket path in its label.
    func testAcceptedConnectionsShareTheListenersOriginAndMakeNoExtras() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/idle.sock"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path), label: "server")
                _ = try server.waitForValues(1)
                let first = try UnixBlockingClient(path: path)
                let second = try UnixBlockingClient(path: path)
                defer { first.close(); second.close() }
                let connections = try waitForAcceptedUnix(server, 2)
                try harness.onLoop {
                    for connection in connections {
                        _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                    }
                }
                try first.sendAll(Array("hi".utf8))
                XCTAssertEqual(try first.receive(exactly: 2), Array("hi".utf8))
                try harness.onLoop {
                    for connection in connections {
                        XCTAssertNil(connection.extrasIfMade, "an accepted connection made its extras")
                        XCTAssertEqual(connection.peerDescription, path)
                        XCTAssertTrue(connection.label.contains("on \(path) accepted by UnixSocket.listen(\(path))"),
                                      connection.label)
                    }
                    XCTAssertTrue(connections[0].originLabel === connections[1].originLabel,
                                  "each connection composed an origin of its own")
                }
                server.dispose()
            }
        }
    }

    /// 1,000 silent connections to an echo server, after 200 that warm the loop's tables up: the
    /// live heap grows by at most 798 bytes per connection (the `UnixConnection`, which is the
    /// stream core, its libuv handle, the `bytes` subscription, malloc's headers): 699 in this
    /// (debug) build (731 with a wrapper object beside the stream core, 763 before that), the
    /// bound leaving slack for the sanitizers' allocators. With an origin and a peer name of its
    /// own per connection (the name made its extras), it was 1,131.
    func testAnIdleUnixEchoConnectionCostsAtMost798HeapBytes() throws {
        try raiseOpenFileLimit(to: 4_096)
        try withTemporaryDirectory { directory in
            let path = directory + "/idle.sock"
            try checked { harness in
                let counts = ServerCounts()
                let server = try harness.onLoop { () -> any Disposable in
                    UnixSocket.serve(path: path, backlog: 1024).subscribe(next: { event in
                        switch event {
                        case .listening: counts.listening.store(true, ordering: .relaxed)
                        case .accepted(let connection):
                            _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                            counts.accepted.wrappingAdd(1, ordering: .relaxed)
                        default: break
                        }
                    })
                }
                try harness.wait(for: "the server listening") { counts.listening.load(ordering: .relaxed) }
                var clients: [UnixBlockingClient] = []
                defer { for client in clients { client.close() } }
                for _ in 0..<200 { clients.append(try UnixBlockingClient(path: path)) }
                try harness.wait(for: "200 accepted") { counts.accepted.load(ordering: .relaxed) == 200 }
                let perConnection = try liveHeapBytesPerConnection(
                    harness, adding: 1_000, reaching: 1_200, accepted: { counts.accepted.load(ordering: .relaxed) }
                ) { for _ in 0..<1_000 { clients.append(try UnixBlockingClient(path: path)) } }
                print("idle unix echo connection: \(perConnection) live heap bytes each")
                XCTAssertLessThanOrEqual(perConnection, 798, "an idle Unix connection costs \(perConnection) heap bytes")
                XCTAssertGreaterThan(perConnection, 264, "less than its libuv handle: the measurement is broken")
                server.dispose()
            }
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

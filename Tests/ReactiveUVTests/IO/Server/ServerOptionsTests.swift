import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Server options refused at the door, for every kind of server: TCP and Unix socket, on one
/// loop and on a group.
final class ServerOptionsTests: XCTestCase {
    /// A connection limit of 0 or less fails the server with `EINVAL` naming the option, before
    /// anything is bound (no `.listening`, no socket file): such a server would reset every client,
    /// and `listen` (it sends connections only) would not even report it.
    func testAConnectionLimitBelowOneFailsTheServerWithEINVAL() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/limited.sock"
            let report = LoopHarness.run { harness in
                let group = EventLoopGroup(loopCount: 2, name: "limited")
                defer { XCTAssertEqual(try? group.tryShutdown().map(\.loopCloseResult), [0, 0]) }
                for limit in [0, -1] {
                    let servers: [(String, Signal<Void>)] = [
                        ("TCPOptions", TCPServer.serve(port: 0, options: TCPOptions(maxConnections: limit)).map { _ in }),
                        ("TCPOptions", TCPServer.listen(port: 0, options: TCPOptions(maxConnections: limit), on: group).map { _ in }),
                        ("UnixSocketOptions", UnixSocket.listen(path: path, options: UnixSocketOptions(maxConnections: limit)).map { _ in }),
                        ("UnixSocketOptions", UnixSocket.serve(path: path, options: UnixSocketOptions(maxConnections: limit),
                                                               on: group).map { _ in }),
                    ]
                    for (index, (option, server)) in servers.enumerated() {
                        let recorder = try harness.record(server, label: "server \(index) with limit \(limit)")
                        let end = try recorder.waitForTermination()
                        let error = try XCTUnwrap(end.error as? UVError, "server \(index): \(end)")
                        XCTAssertEqual(error.name, "EINVAL", "server \(index)")
                        XCTAssertTrue(error.message.contains("\(option).maxConnections must be at least 1")
                                      && error.message.contains("got \(limit)"), "server \(index): \(error)")
                        XCTAssertEqual(recorder.values.count, 0, "server \(index) sent something: \(recorder.events)")
                        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "server \(index) bound a socket file")
                    }
                }
            }
            XCTAssertTrue(report.isClean, "\(report.problems)")
        }
    }

    /// A keep-alive delay past Linux's `TCP_KEEPIDLE` limit (32,767 s; a day is a delay a daemon
    /// might ask) fails a server, on one loop or a group, and a connect with `EINVAL` naming the
    /// limit, before anything is bound or connected; `setKeepAlive` throws the same. The kernel
    /// would refuse it on every connection and keep its 2-hour default.
    func testAKeepAliveBeyondLinuxsLimitIsEINVALNamingIt() throws {
        let report = LoopHarness.run { harness in
            let group = EventLoopGroup(loopCount: 2, name: "keep-alive")
            defer { XCTAssertEqual(try? group.tryShutdown().map(\.loopCloseResult), [0, 0]) }
            let day = TCPOptions(keepAlive: .seconds(86_400))
            let attempts: [Signal<Void>] = [
                TCPServer.serve(port: 0, options: day).map { _ in },
                TCPServer.serve(port: 0, options: day, on: group).map { _ in },
                TCP.connect(host: "127.0.0.1", port: 9, options: day).map { _ in },
            ]
            for (index, attempt) in attempts.enumerated() {
                let recorder = try harness.record(attempt, label: "attempt \(index)")
                let error = try XCTUnwrap(recorder.waitForTermination().error as? UVError, "attempt \(index): \(recorder.events)")
                XCTAssertEqual(error.name, "EINVAL", "attempt \(index)")
                XCTAssertTrue(error.message.contains("TCPOptions.keepAlive must be at most 32767 seconds"), "attempt \(index): \(error)")
                XCTAssertEqual(recorder.values.count, 0, "attempt \(index) sent something: \(recorder.events)")
            }

            // An IPv6 literal is named in brackets: "::1:9" would be another address.
            let ipv6 = try harness.record(TCP.connect(host: "::1", port: 9, options: day), label: "connect to ::1")
            let ipv6Error = try XCTUnwrap(ipv6.waitForTermination().error as? UVError)
            XCTAssertEqual(ipv6Error.context, "TCP.connect([::1]:9)")

            let (server, port) = try startServer(harness, options: TCPOptions(keepAlive: .seconds(32_767)))
            let client = try BlockingClient(port: port)
            defer { client.close() }
            let connection = try waitForAccepted(server, 1)[0]
            try harness.onLoop {
                XCTAssertThrowsError(try connection.setKeepAlive(.seconds(86_400))) { error in
                    XCTAssertEqual((error as? UVError)?.name, "EINVAL")
                    XCTAssertTrue("\(error)".contains("must be at most 32767 seconds"), "\(error)")
                }
                XCTAssertNoThrow(try connection.setKeepAlive(nil))
            }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// An empty host (an unset setting) to a server, on one loop or a group, or to a connect is
    /// `EINVAL` "the host is empty", before any lookup (getaddrinfo's own "invalid argument" names nothing).
    func testAnEmptyHostIsEINVALSayingSo() throws {
        let report = LoopHarness.run { harness in
            let group = EventLoopGroup(loopCount: 2, name: "empty-host")
            defer { XCTAssertEqual(try? group.tryShutdown().map(\.loopCloseResult), [0, 0]) }
            let attempts: [Signal<Void>] = [
                TCPServer.serve(host: "", port: 0).map { _ in },
                TCPServer.serve(host: "", port: 0, on: group).map { _ in },
                TCP.connect(host: "", port: 80).map { _ in },
            ]
            for (index, attempt) in attempts.enumerated() {
                let recorder = try harness.record(attempt, label: "attempt \(index)")
                let error = try XCTUnwrap(recorder.waitForTermination().error as? UVError, "attempt \(index): \(recorder.events)")
                XCTAssertEqual(error.name, "EINVAL", "attempt \(index)")
                XCTAssertTrue(error.message.contains("the host is empty"), "attempt \(index): \(error)")
            }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Server options refused at the door, for every kind of server: TCP and Unix socket, on one
/// loop and on a group.
final class ServerOptionsTests: XCTestCase {
    /// A connection limit of 0 or less fails the server with `EINVAL` naming the option, before
    /// anything is bound (no `.listening`, no socket file). Such a server used to listen and reset
    /// every client, which `listen` (it sends connections only) did not even report.
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
}

import Foundation
import Logging
import ReactiveUV
import ReactiveUVServiceLifecycle
import ReactiveUVTesting
import ServiceLifecycle
import XCTest

// GUIDE-LIFECYCLE-BEGIN
/// Echoes every client on one loop of the group until graceful shutdown.
struct EchoService: Service {
    let port: Int
    let group: EventLoopGroup

    func run() async throws {
        let loop = group.next()
        try await withThrowingDiscardingTaskGroup { clients in
            // Graceful shutdown ends this loop, which closes the listener and every client.
            for try await connection in TCPServer.listen(port: port, on: loop).values(bufferingPolicy: .unbounded)
                .cancelOnGracefulShutdown() {
                clients.addTask(executorPreference: loop) {
                    for try await chunk in connection.bytes.values { connection.send(chunk) }
                    connection.close()
                }
            }
        }
    }
}

/// The program: SIGTERM or Ctrl-C stops the echo service, then shuts the loops down.
func serve(port: Int, on group: EventLoopGroup) async throws {
    // A ServiceGroup stops its services in reverse order: the group comes first, so its loops stop last.
    let services = ServiceGroup(services: [group, EchoService(port: port, group: group)],
                                gracefulShutdownSignals: [.sigterm, .sigint],
                                logger: Logger(label: "echo"))
    try await services.run()
}
// try await serve(port: 7000, on: EventLoopGroup(loopCount: 2))
// GUIDE-LIFECYCLE-END

/// Keeps the example of docs/guides/service-lifecycle.md compiling, and runs it until SIGTERM.
final class GuideServiceLifecycleExampleTests: XCTestCase {
    func testTheGuideExampleIsThisCodeAndStopsOnSIGTERM() async throws {
        try assertDocumentBlock("docs/guides/service-lifecycle.md", containing: "struct EchoService: Service", matches: "GUIDE-LIFECYCLE")

        let group = EventLoopGroup(loopCount: 2, name: "guide-lifecycle")
        let port = try unusedPort()
        let running = Task { try await serve(port: port, on: group) }
        // The service listens only after the ServiceGroup trapped SIGTERM, so from then on
        // SIGTERM reaches the group's handler instead of ending this process.
        var client: BlockingClient?
        try waitFor("the echo service to listen", timeout: .seconds(20)) {
            do {
                client = try BlockingClient(port: port)
                return true
            } catch {
                return false  // ECONNREFUSED until the listener is bound
            }
        }
        let connected = try XCTUnwrap(client)
        defer { connected.close() }
        try connected.sendAll([7, 8, 9])
        XCTAssertEqual(try connected.receive(exactly: 3), [7, 8, 9])

        kill(getpid(), SIGTERM)
        try await running.value

        XCTAssertEqual(connected.receiveUntilEnd().end, .endOfFile, "graceful shutdown closed the client's connection")
        XCTAssertEqual(group.loops.map(\.isShutDown), [true, true], "then every loop shut down")
        XCTAssertEqual(try group.tryShutdown().map(\.loopCloseResult), [0, 0])
    }
}

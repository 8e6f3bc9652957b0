import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import ServiceLifecycle
import XCTest

/// A small service that uses one loop of a group: an echo server, served until graceful shutdown.
///
/// It reports its port once listening, and when it ends, whether the group's loops were all still running.
struct EchoOnGroupService: Service {
    let group: EventLoopGroup
    /// The port once listening.
    let port = Locked<Int?>(nil)
    /// Whether every loop of the group was still running when `run()` ended; nil before it ends.
    let loopsRunningAtEnd = Locked<Bool?>(nil)

    func run() async throws {
        let loop = group.next()
        let port = self.port
        try await cancelWhenGracefulShutdown {
            for try await event in EchoServer.run(port: 0, on: loop).values {
                if case .listening(let address) = event { port.withLock { $0 = address.port } }
            }
        }
        loopsRunningAtEnd.withLock { $0 = !group.loops.contains { $0.isShutDown } }
    }

    /// Waits (blocking) until the server listens, then checks that it echoes.
    func waitUntilServing() throws {
        try waitFor("the echo service to listen", timeout: .seconds(20)) { port.current != nil }
        let client = try BlockingClient(port: try XCTUnwrap(port.current))
        defer { client.close() }
        try client.sendAll([1, 2, 3])
        XCTAssertEqual(try client.receive(exactly: 3), [1, 2, 3], "the service echoes on the group's loop")
    }
}

/// A test precondition that did not hold.
struct ServiceTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` on a new thread that is no loop's and waits for it (owner-thread loops need such a thread).
func onNewThread(_ body: @escaping @Sendable () -> Void) {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.start()
    done.wait()
}

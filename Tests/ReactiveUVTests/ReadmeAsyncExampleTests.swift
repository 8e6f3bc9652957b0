import Foundation
import ReactiveUV
import XCTest

/// Keeps the README's async/await example compiling and runs its second half.
final class ReadmeAsyncExampleTests: XCTestCase {
    private static func readmeAsyncExample() async throws -> (Int?, Signal<Int>) {
        // README-ASYNC-EXAMPLE-BEGIN
        // Each client gets a task; every task runs on `loop` (its task executor).
        func echoServer(port: Int, on loop: EventLoop) async throws {
            try await withThrowingDiscardingTaskGroup { clients in
                for try await connection in TCPServer.listen(port: port, on: loop).values(bufferingPolicy: .unbounded) {
                    clients.addTask(executorPreference: loop) {
                        // A full buffer pauses the socket, so a slow task cannot make memory grow.
                        for try await chunk in connection.bytes.values { connection.send(chunk) }
                        connection.close()  // sends what is still queued, then FIN, then closes
                    }
                }
            }
        }

        // One value awaited (the timer is disposed after it), and async code as a signal.
        let tick = try await Signal<Int>.interval(.milliseconds(10)).first()
        let answer = Signal<Int>.async { try await Task.sleep(for: .milliseconds(5)); return 42 }
        // README-ASYNC-EXAMPLE-END
        _ = echoServer  // the echo server's behaviour is tested by EchoAsyncSampleTests
        return (tick, answer)
    }

    func testTheReadmeAsyncExampleIsThisCodeAndWorks() async throws {
        try assertReadmeBlock(containing: "withThrowingDiscardingTaskGroup", matches: "README-ASYNC-EXAMPLE")
        let (tick, answer) = try await ReadmeAsyncExampleTests.readmeAsyncExample()
        XCTAssertEqual(tick, 0)
        let value = try await answer.first()
        XCTAssertEqual(value, 42)
    }
}

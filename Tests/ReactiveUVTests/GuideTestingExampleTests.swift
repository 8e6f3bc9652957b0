import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the examples of docs/guides/testing.md compiling (each block equals the code between its markers)
/// and runs them: they are tests themselves.
final class GuideTestingExampleTests: XCTestCase {
    static let guide = "docs/guides/testing.md"

    func testTheTestSchedulerExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock(Self.guide, containing: "TestScheduler()", matches: "GUIDE-TESTING-SCHEDULER")
        // GUIDE-TESTING-SCHEDULER-BEGIN
        let scheduler = TestScheduler()
        let input = Subject<String>()
        let recorder = scheduler.performAsCurrent { EventRecorder(input.debounce(.milliseconds(300))) }

        scheduler.performAsCurrent { input.sendNext("r"); input.sendNext("re") }
        scheduler.advance(by: .milliseconds(100))
        scheduler.performAsCurrent { input.sendNext("rea") }
        scheduler.advance(by: .milliseconds(300))

        XCTAssertEqual(recorder.values, ["rea"])
        XCTAssertEqual(recorder.recorded.first?.time, SchedulerInstant(nanoseconds: 400_000_000))
        // GUIDE-TESTING-SCHEDULER-END
    }

    func testTheLoopHarnessExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock(Self.guide, containing: "BlockingClient(port: address.port)", matches: "GUIDE-TESTING-HARNESS")
        // GUIDE-TESTING-HARNESS-BEGIN
        let report = LoopHarness.run { harness in
            // Port 0: the system picks a free port, which the server's first event names.
            let server = try harness.record(TCPServer.serve(port: 0).doNext { event in
                if case .accepted(let connection) = event {
                    connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                }
            })
            guard case .listening(let address)? = try server.waitForValues(1).first else { return XCTFail("not listening") }

            let client = try BlockingClient(port: address.port)
            try client.sendAll(Array("hello".utf8))
            XCTAssertEqual(try client.receive(exactly: 5), Array("hello".utf8))
            client.shutdownWrite()
            XCTAssertEqual(try client.receiveUntilEOF(), [], "the server closes after the client's EOF")
            client.close()
        }  // fails the test if a handle is left open or uv_loop_close != 0
        XCTAssertTrue(report.isClean, "\(report.problems)")
        // GUIDE-TESTING-HARNESS-END
    }
}

import Foundation
import ReactiveUV
import XCTest

/// Keeps the README's example compiling: its lines must equal the body below, which the compiler checks and the test runs.
final class ReadmeExampleTests: XCTestCase {
    private static func readmeExample() {
        // README-EXAMPLE-BEGIN
        // The calling thread becomes the loop's thread; run() drives it.
        let loop = EventLoop.onCurrentThread()

        let ticks = Signal<Int>.interval(.milliseconds(100)).named("ticks")
        let subscription = ticks.subscribe(next: { print("tick", $0) },
                                           completed: { print("done") })

        // A second signal stops the first after 350 ms.
        Signal<Void>.timer(after: .milliseconds(350)).subscribeNext { _ in
            subscription.dispose()
        }

        loop.run()  // returns once nothing is left to do, after ticks 0, 1, 2
        loop.shutdown()
        // README-EXAMPLE-END
    }

    func testTheReadmeExampleIsThisCodeAndRuns() throws {
        try assertReadmeBlock(containing: "EventLoop.onCurrentThread()\n\nlet ticks", matches: "README-EXAMPLE")
        let start = SchedulerInstant.now
        onNewThread { ReadmeExampleTests.readmeExample() }
        XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(350))
    }
}

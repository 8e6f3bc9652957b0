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
        let here = URL(fileURLWithPath: #filePath)
        let readme = try String(contentsOf: here.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)

        let block = readme.components(separatedBy: "```swift\n")[1].components(separatedBy: "```")[0]
        let readmeLines = block.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0 != "import ReactiveUV" }
        let body = source.components(separatedBy: "// README-EXAMPLE-BEGIN\n")[1]
            .components(separatedBy: "// README-EXAMPLE-END")[0]
        let testLines = body.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertEqual(readmeLines.drop { $0.isEmpty }.reversed().drop { $0.isEmpty }.reversed(),
                       testLines.drop { $0.isEmpty }.reversed().drop { $0.isEmpty }.reversed(),
                       "README.md's example and ReadmeExampleTests.readmeExample() must stay identical")

        let start = SchedulerInstant.now
        onNewThread { ReadmeExampleTests.readmeExample() }
        XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(350))
    }
}

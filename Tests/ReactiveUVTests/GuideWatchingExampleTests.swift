import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the example of docs/guides/watching.md compiling and runs it on a directory of the test's own.
final class GuideWatchingExampleTests: XCTestCase {
    // GUIDE-WATCHING-SETTLED-BEGIN
    /// Sends once a burst of changes under `directory` (its subdirectories included) has been quiet
    /// for 100 ms: the moment to rebuild, reload a configuration or rescan.
    func settled(_ directory: String) -> Signal<Void> {
        FileWatch.changes(at: directory, recursive: true)
            .debounce(.milliseconds(100))
            .mapReplace(())
    }
    // GUIDE-WATCHING-SETTLED-END

    /// A burst of writes, in the directory and in a subdirectory, is told once it has been quiet for
    /// 100 ms; a later write is told again; the watch stays open until disposed.
    func testTheSettledExampleIsThisCodeAndSendsAfterEachBurst() throws {
        try assertDocumentBlock("docs/guides/watching.md", containing: "func settled(", matches: "GUIDE-WATCHING-SETTLED")
        let directory = NSTemporaryDirectory() + "guide-watching-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func write(_ text: String, to name: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
        }
        let report = LoopHarness.run(timeout: .seconds(60)) { harness in
            let quiet = try harness.record(settled(directory))
            let burstBegan = ContinuousClock.now
            try write("a", to: "a.txt")
            try write("b", to: "sub/b.txt")
            try quiet.waitForValues(1, timeout: .seconds(60))
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - burstBegan, .milliseconds(100),
                                        "told only after 100 ms without a change")
            let toldForTheBurst = quiet.values.count
            try write("c", to: "sub/c.txt")
            try quiet.waitForValues(toldForTheBurst + 1, timeout: .seconds(60))
            XCTAssertNil(quiet.terminal, "the watch goes on")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

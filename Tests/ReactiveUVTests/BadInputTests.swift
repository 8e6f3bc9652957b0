import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Rows of docs/BAD-INPUT.md that no other suite covers: each input gets an error
/// event (or a documented, harmless outcome), never a crash, a hang or a leaked handle.
final class BadInputTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-badinput-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func checked(_ body: (LoopHarness) throws -> Void) {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// A watched directory deleted while watched ends the signal with ENOENT (the kernel dropped the watch).
    func testADirectoryDeletedWhileWatchedEndsWithENOENT() throws {
        let watched = directory + "/watched"
        try FileManager.default.createDirectory(atPath: watched, withIntermediateDirectories: false)
        checked { harness in
            let watch = try! harness.record(FileWatch.changes(at: watched))
            try! harness.wait(for: "the watch to start") { (try? harness.loop.openHandles().count) ?? 0 >= 1 }
            try! FileManager.default.removeItem(atPath: watched)
            let terminal = try! watch.waitForTermination()
            let error = terminal.error as? UVError
            XCTAssertEqual(error?.name, "ENOENT", "\(terminal)")
            XCTAssertTrue(error?.description.contains("deleted or moved away") ?? false, "\(String(describing: error))")
        }
    }

    /// A watched file deleted while watched: its deletion is reported, then the signal ends with ENOENT.
    func testAFileDeletedWhileWatchedIsReportedThenEndsWithENOENT() throws {
        let file = directory + "/file.txt"
        _ = FileManager.default.createFile(atPath: file, contents: Data([1]))
        checked { harness in
            let watch = try! harness.record(FileWatch.changes(at: file))
            try! harness.wait(for: "the watch to start") { (try? harness.loop.openHandles().count) ?? 0 >= 1 }
            unlink(file)
            let terminal = try! watch.waitForTermination()
            XCTAssertEqual((terminal.error as? UVError)?.name, "ENOENT", "\(watch.events)")
            XCTAssertEqual(watch.values.last?.kind, .renamed, "the deletion itself is reported first")
        }
    }

    /// A link in a recursively watched tree to a directory outside it: not followed unless asked.
    func testARecursiveWatchDoesNotFollowASymlinkOutOfTheTreeUnlessAsked() throws {
        let tree = directory + "/tree", outside = directory + "/outside"
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: false)
        XCTAssertEqual(symlink(outside, tree + "/link"), 0)
        for follow in [false, true] {
            checked { harness in
                let before = InotifyProbe.watchesOfThisProcess()
                let watch = try! harness.record(FileWatch.changes(at: tree, recursive: true, followSymlinks: follow))
                let expected = follow ? 2 : 1
                XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, expected, "watches with followSymlinks: \(follow)")
                _ = FileManager.default.createFile(atPath: outside + "/secret-\(follow)", contents: Data([1]))
                _ = FileManager.default.createFile(atPath: tree + "/marker-\(follow)", contents: Data([1]))
                try! watch.wait(for: "the marker") { events in events.contains { $0.value?.name == "marker-\(follow)" } }
                if follow {
                    try! watch.wait(for: "the linked file") { events in events.contains { $0.value?.name == "link/secret-true" } }
                } else {
                    XCTAssertFalse(watch.values.contains { $0.path.hasPrefix(outside) || $0.name.hasPrefix("link/") },
                                   "nothing beyond the link is reported: \(watch.values)")
                }
                watch.dispose()
            }
        }
    }

    /// A link cycle with followSymlinks: each directory is watched once, and the watch starts.
    func testASymlinkCycleEndsWhenLinksAreFollowed() throws {
        let tree = directory + "/cycle"
        try FileManager.default.createDirectory(atPath: tree + "/a/b", withIntermediateDirectories: true)
        XCTAssertEqual(symlink(tree, tree + "/a/b/up"), 0)
        checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try! harness.record(FileWatch.changes(at: tree, recursive: true, followSymlinks: true))
            _ = FileManager.default.createFile(atPath: tree + "/a/b/new", contents: Data([1]))
            try! watch.wait(for: "the new file") { events in events.contains { $0.value?.name == "a/b/new" } }
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 3, "root, a and a/b; the link back to the root is not watched again")
            XCTAssertNil(watch.terminal)
        }
    }

    /// Negative delays run at once; a huge one never fires, is cancellable and leaves nothing open.
    func testNegativeAndHugeDurations() throws {
        checked { harness in
            let soon = try! harness.record(Signal<Void>.timer(after: .seconds(-5)))
            let ending = try! soon.waitForTermination()
            XCTAssertTrue(ending.isTerminating && ending.error == nil, "\(ending)")
            XCTAssertEqual(soon.values.count, 1)
            let never = try! harness.record(Signal<Void>.timer(after: .seconds(Int64.max)))
            let huge = harness.loop.schedule(after: .seconds(Int64.max)) { XCTFail("a huge delay fired") }
            let ticks = try! harness.record(Signal<Int>.interval(.seconds(Int64.max)))
            XCTAssertNil(never.terminal)
            XCTAssertEqual(ticks.values, [])
            never.dispose()
            ticks.dispose()
            huge?.dispose()
            let negative = try! harness.record(Signal<Int>.interval(.milliseconds(-1)))
            XCTAssertEqual((try! negative.waitForTermination().error as? UVError)?.name, "EINVAL")
        }
    }

    /// Zero capacity replays only the terminal event; a negative one is reported and treated as zero.
    func testZeroAndNegativeReplayCapacities() {
        checked { harness in
            for capacity in [0, -3] {
                // On the loop thread, subscribing is synchronous, so the order below is the order of events.
                let (early, late) = try! harness.onLoop { () -> ([String], [String]) in
                    let subject = ReplaySubject<Int>(capacity: capacity)
                    XCTAssertEqual(subject.capacity, 0)
                    subject.sendNext(1)
                    let early = Locked<[Event<Int>]>([])
                    let first = self.collect(subject, into: early)
                    subject.sendNext(2)
                    subject.sendCompleted()
                    let late = Locked<[Event<Int>]>([])
                    let second = self.collect(subject, into: late)
                    first.dispose()
                    second.dispose()
                    return (early.current.map(\.description), late.current.map(\.description))
                }
                XCTAssertEqual(early, [Event<Int>.next(2).description, Event<Int>.completed.description], "capacity \(capacity)")
                XCTAssertEqual(late, [Event<Int>.completed.description], "capacity \(capacity)")
            }
        }
    }

    /// Subscribing to a loop's I/O or timers after the loop shut down: an error event, not silence.
    func testSubscribingToAShutDownLoopIsAnError() throws {
        let loop = EventLoop(name: "gone")
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        let signals: [(String, Signal<Void>)] = [
            ("TCPServer.listen", TCPServer.listen(port: 0, on: loop).map { _ in () }),
            ("FileWatch.changes", FileWatch.changes(at: directory, on: loop).map { _ in () }),
            ("Signal.timer", Signal<Void>.timer(after: .milliseconds(1), on: loop)),
            ("Signal.interval", Signal<Int>.interval(.milliseconds(1), on: loop).map { _ in () }),
        ]
        for (name, signal) in signals {
            let events = Locked<[Event<Void>]>([])
            let disposable = collect(signal, into: events)
            waitUntil("\(name)'s error") { events.current.count == 1 }
            XCTAssertTrue(events.current.first?.error is EventLoopError, "\(name): \(events.current)")
            disposable.dispose()
        }
    }

    private func collect<Value>(_ signal: Signal<Value>, into events: Locked<[Event<Value>]>) -> any Disposable {
        signal.subscribe(next: { value in events.withLock { $0.append(.next(value)) } },
                         error: { error in events.withLock { $0.append(.error(error)) } },
                         completed: { events.withLock { $0.append(.completed) } })
    }
}

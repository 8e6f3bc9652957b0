import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class FileWatchTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-watch-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Create, modify, rename and delete in a watched directory: each is seen, with the entry's name; the
    /// rename as one `.moved` event with both names.
    func testCreateModifyRenameAndDeleteAreEachSeen() throws {
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: directory))
            try write("hello", to: "a.txt")
            try waitFor(watch, .renamed, "a.txt", after: 0)

            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path("a.txt")))
            handle.seekToEndOfFile()
            handle.write(Data(" world".utf8))
            handle.closeFile()
            try waitFor(watch, .changed, "a.txt", after: 1)

            let beforeRename = watch.values.count
            try FileManager.default.moveItem(atPath: path("a.txt"), toPath: path("b.txt"))
            try waitFor(watch, .moved, "b.txt", after: beforeRename)
            // The write's last `.changed` may come after `beforeRename` was counted.
            XCTAssertEqual(watch.values.dropFirst(beforeRename).filter { $0.kind != .changed },
                           [FileEvent(kind: .moved, name: "b.txt", path: path("b.txt"), oldName: "a.txt", oldPath: path("a.txt"))])

            let beforeDelete = watch.values.count
            try FileManager.default.removeItem(atPath: path("b.txt"))
            try waitFor(watch, .renamed, "b.txt", after: beforeDelete)
            XCTAssertTrue(watch.values.allSatisfy { $0.path == directory + "/" + $0.name }, "\(watch.values)")
            XCTAssertNil(watch.terminal)
        }
    }

    /// Watching a file reports its own changes under its name.
    func testWatchingAFileReportsItsChanges() throws {
        try write("1", to: "watched.txt")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: path("watched.txt")))
            try write("22", to: "watched.txt")
            try waitFor(watch, .changed, "watched.txt", after: 0)
            XCTAssertEqual(watch.values.first?.path, path("watched.txt"))
        }
    }

    /// The recursive emulation follows directories made after the watch began, however deep.
    func testARecursiveWatchSeesFilesInSubdirectoriesMadeAfterItBegan() throws {
        try FileManager.default.createDirectory(atPath: path("old"), withIntermediateDirectories: true)
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try harness.record(FileWatch.changes(at: directory, recursive: true))
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 2, "the root and the existing subdirectory")
            XCTAssertEqual(try harness.loop.openHandles().count, 1, "one inotify instance per loop")

            try write("x", to: "old/existing.txt")
            try waitFor(watch, .renamed, "old/existing.txt", after: 0)

            try FileManager.default.createDirectory(atPath: path("sub"), withIntermediateDirectories: false)
            try waitFor(watch, .renamed, "sub", after: 0)
            try write("y", to: "sub/new.txt")
            try waitFor(watch, .renamed, "sub/new.txt", after: 0)

            // A whole tree at once: entries made before their directory's watch existed are announced.
            try FileManager.default.createDirectory(atPath: path("sub/a/b"), withIntermediateDirectories: true)
            try write("z", to: "sub/a/b/deep.txt")
            try waitFor(watch, .renamed, "sub/a/b/deep.txt", after: 0)
            try harness.wait(for: "watches on root, old, sub, sub/a, sub/a/b") { InotifyProbe.watchesOfThisProcess() - before == 5 }

            // Deleting a directory drops its watches.
            try FileManager.default.removeItem(atPath: path("sub"))
            try harness.wait(for: "the watches below sub to go") { InotifyProbe.watchesOfThisProcess() - before == 2 }
        }
    }

    /// Watches on one loop share its inotify instance, and the kernel's watches per inode: one subscription
    /// leaving (or its file being replaced) does not silence another that watches the same inode.
    func testWatchesOnOneLoopShareTheInstanceAndLeaveEachOtherAlone() throws {
        try FileManager.default.createDirectory(atPath: path("sub"), withIntermediateDirectories: false)
        try write("1", to: "a.txt")
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let plain = try harness.record(FileWatch.changes(at: directory))
            let tree = try harness.record(FileWatch.changes(at: directory, recursive: true))
            let file = try harness.record(FileWatch.changes(at: path("a.txt")))
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 3, "the directory, sub and a.txt, each once")
            XCTAssertEqual(try harness.loop.openHandles().count, 1)

            tree.dispose()
            try harness.wait(for: "sub's watch to go with the tree") { InotifyProbe.watchesOfThisProcess() - before == 2 }
            try write("b", to: "b.txt")
            try waitFor(plain, .renamed, "b.txt", after: 0)
            try write("22", to: "a.txt")
            try waitFor(file, .changed, "a.txt", after: 0)

            file.dispose()
            try harness.wait(for: "a.txt's watch to go") { InotifyProbe.watchesOfThisProcess() - before == 1 }
            let seen = plain.values.count
            try write("c", to: "c.txt")
            try waitFor(plain, .renamed, "c.txt", after: seen)
            XCTAssertNil(plain.terminal)
            plain.dispose()
            try harness.wait(for: "the instance to close") { (try? harness.loop.openHandles().count) == 0 }
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess(), before)
        }
    }

    func testAMissingPathIsENOENT() throws {
        try checked { harness in
            for signal in [FileWatch.changes(at: path("nope")), FileWatch.changes(at: path("nope"), recursive: true)] {
                let watch = try harness.record(signal)
                let error = try XCTUnwrap(try watch.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "ENOENT")
                XCTAssertTrue(error.description.contains(path("nope")), error.description)
            }
            let poll = try harness.record(FileWatch.poll(at: path("nope"), interval: .milliseconds(10)))
            XCTAssertEqual((try poll.waitForTermination().error as? UVError)?.name, "ENOENT")
        }
    }

    func testAnUnreadableDirectoryIsEACCES() throws {
        try FileManager.default.createDirectory(atPath: path("locked"), withIntermediateDirectories: false)
        chmod(path("locked"), 0)
        chmod(directory, 0o755)  // `nobody` must reach the directory to be refused by its own mode
        defer { chmod(path("locked"), 0o755) }
        // As root the check runs as `nobody` (root reads every directory).
        try withoutRootPrivileges {
            try checked { harness in
                let watch = try harness.record(FileWatch.changes(at: path("locked")))
                XCTAssertEqual((try watch.waitForTermination().error as? UVError)?.name, "EACCES")
            }
        }
    }

    /// Polling reports the status before and after: a growth, a deletion (current nil), a re-creation (previous nil).
    func testPollingReportsChangesDeletionAndRecreation() throws {
        try write("1", to: "polled.txt")
        try checked { harness in
            let poll = try harness.record(FileWatch.poll(at: path("polled.txt"), interval: .milliseconds(20)))
            // The first poll takes the baseline on the thread pool; a write that lands before it is not a change.
            // So keep growing the file until a change is reported.
            var size = 1
            try harness.wait(for: "a growth to be reported") {
                if poll.values.isEmpty, size < 4000 {
                    size += 1
                    try? write(String(repeating: "x", count: size), to: "polled.txt")
                }
                return !poll.values.isEmpty
            }
            let grown = poll.values[0]
            XCTAssertEqual(grown.previous?.size, 1, "the first change starts from the status found at subscription")
            XCTAssertNotNil(grown.current)
            XCTAssertNotEqual(grown.previous, grown.current)
            try harness.wait(for: "the last growth to be polled") { poll.values.last?.current?.size == UInt64(size) }

            try FileManager.default.removeItem(atPath: path("polled.txt"))
            try poll.wait(for: "the deletion") { $0.contains { $0.value?.current == nil } }
            let deleted = try XCTUnwrap(poll.values.first { $0.current == nil })
            XCTAssertEqual(deleted.previous?.size, UInt64(size))

            try write("abcdef", to: "polled.txt")
            try poll.wait(for: "the re-creation") { $0.contains { $0.value?.previous == nil } }
            let recreated = try XCTUnwrap(poll.values.first { $0.previous == nil })
            XCTAssertEqual(recreated.current?.size, 6)
        }
    }

    func testANonPositivePollIntervalIsEINVAL() throws {
        try checked { harness in
            let poll = try harness.record(FileWatch.poll(at: directory, interval: .zero))
            XCTAssertEqual((try poll.waitForTermination().error as? UVError)?.name, "EINVAL")
        }
    }

    /// A path with a NUL byte is refused with `EINVAL`, an empty one with `ENOENT` "the path is empty", before
    /// anything is watched. Before, inotify and stat took the C string cut at the NUL: `changes(at: "dir\0junk")`
    /// watched `dir` and reported its entries under paths that held the rest (`dir\0junk/f`), `poll` polled
    /// `dir/f` without a word, and the empty path was `ENOENT` "(stat )", naming nothing.
    func testANULByteIsEINVALAndAnEmptyPathENOENTBeforeAnythingIsWatched() throws {
        try FileManager.default.createDirectory(atPath: path("x"), withIntermediateDirectories: false)
        try write("1", to: "x/f")
        let before = InotifyProbe.watchesOfThisProcess()
        try checked { harness in
            let cut = path("x") + "\0junk"
            let signals = [FileWatch.changes(at: cut), FileWatch.changes(at: cut, recursive: true),
                           FileWatch.changes(at: path("x/f") + "\0"), FileWatch.changes(at: "")]
            for signal in signals {
                let watch = try harness.record(signal)
                let error = try XCTUnwrap(try watch.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, error.message == "the path is empty" ? "ENOENT" : "EINVAL", error.description)
                XCTAssertTrue(error.message.contains("NUL byte") || error.message == "the path is empty", error.description)
                XCTAssertTrue(error.context.hasPrefix("FileWatch.changes"), error.description)
                XCTAssertEqual(watch.values, [])
            }
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess(), before, "nothing was watched")
            for polled in [path("x/f") + "\0junk", ""] {
                let poll = try harness.record(FileWatch.poll(at: polled, interval: .milliseconds(10)))
                let error = try XCTUnwrap(try poll.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, polled.isEmpty ? "ENOENT" : "EINVAL", error.description)
                XCTAssertTrue(error.context.hasPrefix("FileWatch.poll"), error.description)
            }
        }
    }

    /// Shutting the loop down ends a watch with EventLoopError.shutDown and closes every watch.
    func testLoopShutdownEndsAWatch() throws {
        try FileManager.default.createDirectory(atPath: path("d/e"), withIntermediateDirectories: true)
        let before = InotifyProbe.watchesOfThisProcess()
        let loop = EventLoop(name: "watch-shutdown")
        let recorder = Locked<EventRecorder<FileEvent>?>(nil)
        let root = directory
        loop.execute { recorder.withLock { $0 = EventRecorder(FileWatch.changes(at: root, recursive: true)) } }
        waitUntil("the watch") { recorder.current != nil }
        XCTAssertEqual(InotifyProbe.watchesOfThisProcess(), 3 + before, "the root, d and d/e")
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.closedHandles.count, 1, "the loop's one inotify instance")
        XCTAssertEqual(InotifyProbe.watchesOfThisProcess(), before, "closing the instance drops its watches")
        XCTAssertEqual(recorder.current?.terminal?.error as? EventLoopError, .shutDown(loop: "watch-shutdown"))
    }

    // MARK: - helpers

    private func path(_ name: String) -> String { directory + "/" + name }

    private func write(_ text: String, to name: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path(name)))
    }

    private func waitFor(_ watch: EventRecorder<FileEvent>, _ kind: FileEvent.Kind, _ name: String, after index: Int) throws {
        try watch.wait(for: "\(kind) \(name)") { events in
            events.compactMap(\.value).dropFirst(index).contains { $0.kind == kind && $0.name == name }
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// File watches: nothing fails silently. Each case is a way a watch could stop reporting, or
/// report under a wrong name, with no error; real directories under a temporary path.
final class FileWatchSilenceTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-silence-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        chmod(directory, 0o755)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A subdirectory deleted and made again while the loop is busy (so the watch hears of both only after the
    /// new one exists): the new directory is watched, and files made in it before its watch are found.
    func testASubdirectoryDeletedAndMadeAgainIsWatchedAgain() throws {
        try FileManager.default.createDirectory(atPath: path("sub"), withIntermediateDirectories: false)
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try harness.record(FileWatch.changes(at: directory, recursive: true))
            let early = (0..<6).map { "sub/early\($0)" }
            try harness.onLoop { [self] in
                try FileManager.default.removeItem(atPath: path("sub"))
                try FileManager.default.createDirectory(atPath: path("sub"), withIntermediateDirectories: false)
                for name in early { try write("x", to: name) }
            }
            try watch.wait(for: "the 6 files made in the new sub") { events in
                Set(early).isSubset(of: events.compactMap { $0.value?.name })
            }
            // Its watch is live on the new inode: files made now are reported too.
            let seen = watch.values.count
            let late = (0..<6).map { "sub/late\($0)" }
            for name in late { try write("y", to: name) }
            try watch.wait(for: "the 6 files made after") { events in
                Set(late).isSubset(of: events.dropFirst(seen).compactMap { $0.value?.name })
            }
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 2, "the root and the new sub; the dead watch is gone")
            XCTAssertNil(watch.terminal)
        }
    }

    /// A directory above a recursively watched one renamed: inotify reports nothing of it (only the root's own
    /// move), and each path the watch builds from the root is wrong from then on. A subdirectory made after
    /// it could not be found by its path and was taken as gone already: never watched, its files were never
    /// reported, while the watch looked alive. The watch now ends with `ENOENT` saying why, after the
    /// subdirectory's own event.
    func testARecursiveWatchEndsWhenADirectoryAboveItWasRenamedAndANewSubdirectoryCannotBeWatched() throws {
        try FileManager.default.createDirectory(atPath: path("parent/root"), withIntermediateDirectories: true)
        let root = path("parent/root")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: root, recursive: true))
            XCTAssertEqual(rename(path("parent"), path("moved")), 0)
            try FileManager.default.createDirectory(atPath: path("moved/root/sub"), withIntermediateDirectories: false)
            let error = try XCTUnwrap(try watch.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ENOENT")
            XCTAssertTrue(error.message.hasPrefix("the watched path no longer leads to the watched directory: a directory above it was renamed"),
                          error.description)
            XCTAssertEqual(error.context, "watching \(root)")
            XCTAssertEqual(watch.values.map(\.description), ["renamed sub"])
        }
    }

    /// Two subdirectories of a recursive watch exchanged atomically (`renameat2` with `RENAME_EXCHANGE`, as
    /// `mv --exchange` or a deploy's directory swap does): inotify reports "b" moved in before "b" moved out,
    /// so the watch added for the new "b" was dropped by the older move, and files made in "b" afterwards
    /// were never reported. The exchange is two `.moved` events, and both stay watched under their new names.
    func testTwoSubdirectoriesExchangedAtomicallyAreBothStillWatched() throws {
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else {
            throw XCTSkip("this C library has no renameat2")
        }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        try FileManager.default.createDirectory(atPath: path("a"), withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: path("b"), withIntermediateDirectories: false)
        try write("1", to: "a/from-a")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: directory, recursive: true))
            let exchange: UInt32 = 2  // RENAME_EXCHANGE
            guard renameat2(AT_FDCWD, path("a"), AT_FDCWD, path("b"), exchange) == 0 else {
                throw XCTSkip("this file system cannot exchange names (errno \(errno))")
            }
            try watch.wait(for: "the exchange: a moved to b and b to a") { events in
                events.compactMap { $0.value?.description } == ["moved a -> b", "moved b -> a"]
            }
            try write("2", to: "a/new-in-a")
            try write("3", to: "b/new-in-b")
            try watch.wait(for: "both new files") { events in
                Set(["a/new-in-a", "b/new-in-b"]).isSubset(of: events.compactMap { $0.value?.name })
            }
            XCTAssertNil(watch.terminal)
        }
    }

    /// An editor's atomic save (write a temporary file, rename it over the watched name): the replacement is
    /// reported, and appends to the new file keep being reported.
    func testAFileReplacedByRenameIsFollowed() throws {
        try write("v1", to: "config")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: path("config")))
            for round in 1...2 {
                let start = watch.values.count
                try write("v\(round + 1)", to: "config.tmp")
                XCTAssertEqual(rename(path("config.tmp"), path("config")), 0)
                try watch.wait(for: "the replacement \(round)") { events in
                    events.compactMap(\.value).dropFirst(start).contains { $0.kind == .renamed && $0.name == "config" }
                }
                let replaced = watch.values.count
                let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path("config")))
                handle.seekToEndOfFile()
                handle.write(Data(" appended".utf8))
                handle.closeFile()
                try watch.wait(for: "the append to the new file \(round)") { events in
                    events.compactMap(\.value).dropFirst(replaced).contains { $0.kind == .changed && $0.name == "config" }
                }
            }
            XCTAssertTrue(watch.values.allSatisfy { $0.path == path("config") }, "\(watch.values)")
            XCTAssertNil(watch.terminal)
        }
    }

    /// A watched file moved away (nothing takes its name): reported, then ENOENT; the moved file is not watched.
    func testAFileMovedAwayIsReportedThenEndsWithENOENT() throws {
        try write("1", to: "log")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: path("log")))
            XCTAssertEqual(rename(path("log"), path("log.1")), 0)
            let terminal = try watch.waitForTermination()
            let error = try XCTUnwrap(terminal.error as? UVError, "\(watch.events)")
            XCTAssertEqual(error.name, "ENOENT")
            XCTAssertTrue(error.description.contains("no file took its name"), error.description)
            XCTAssertEqual(watch.values.last?.kind, .renamed, "the move is reported first: \(watch.values)")
        }
    }

    /// `chmod` and `touch` of the watched directory are a change of the directory itself ("."), not an entry
    /// named after it; a `chmod` of a subdirectory is a change of that entry, not a rename.
    func testChangesToTheWatchedDirectoryItselfAreNamedDot() throws {
        try FileManager.default.createDirectory(atPath: path("child"), withIntermediateDirectories: false)
        let ownName = URL(fileURLWithPath: directory).lastPathComponent
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: directory))
            XCTAssertEqual(chmod(directory, 0o700), 0)
            try watch.wait(for: "changed .") { events in events.contains { $0.value == FileEvent(kind: .changed, name: ".", path: directory) } }
            let afterChmod = watch.values.count
            XCTAssertEqual(utimes(directory, nil), 0)
            try watch.wait(for: "changed . again (touch)") { events in
                events.compactMap(\.value).dropFirst(afterChmod).contains { $0.kind == .changed && $0.name == "." }
            }
            XCTAssertEqual(chmod(path("child"), 0o700), 0)
            try watch.wait(for: "changed child") { events in
                events.contains { $0.value == FileEvent(kind: .changed, name: "child", path: path("child")) }
            }
            XCTAssertFalse(watch.values.contains { $0.name == ownName }, "nothing named after the directory: \(watch.values)")
            XCTAssertFalse(watch.values.contains { $0.kind == .renamed }, "nothing was renamed: \(watch.values)")
        }
    }

    /// More directories than `fs.inotify.max_user_watches` allows: the watch ends with ENOSPC naming the limit
    /// and a directory it could not watch, instead of watching part of the tree in silence.
    func testMoreDirectoriesThanTheWatchLimitIsENOSPCNamingTheLimit() throws {
        try InotifyProbe.requireWritableLimit("max_user_watches")
        let directoryCount = 60
        for index in 0..<directoryCount {
            try FileManager.default.createDirectory(atPath: path("d\(index)"), withIntermediateDirectories: false)
        }
        try checked { harness in
            // The limit counts every watch of this user on the machine: leave room for 20 of ours, fewer than the 61
            // this tree needs; the lowered window lasts only as long as the subscription's start.
            let limit = InotifyProbe.watchesOfEveryProcess() + 20
            let watch = try InotifyProbe.withLimit("max_user_watches", setTo: limit) {
                try harness.record(FileWatch.changes(at: directory, recursive: true))
            }
            let error = try XCTUnwrap(try watch.waitForTermination().error as? UVError, "\(watch.events.suffix(3))")
            XCTAssertEqual(error.name, "ENOSPC")
            XCTAssertTrue(error.message.contains("fs.inotify.max_user_watches (\(limit))"), error.message)
            XCTAssertTrue(error.message.contains(directory + "/d"), "names the directory: \(error.message)")
        }
    }

    /// The kernel's event queue overflows while the loop is busy: an `.eventsLost` event says so, a directory made
    /// meanwhile is watched by then, and changes after it are reported.
    func testAQueueOverflowIsReportedAsEventsLost() throws {
        try InotifyProbe.requireWritableLimit("max_queued_events")
        let queueLength = 64
        try checked { harness in
            // The queue length is read when the instance opens (at the loop's first watch): lowered only for that.
            let watch = try InotifyProbe.withLimit("max_queued_events", setTo: queueLength) {
                try harness.record(FileWatch.changes(at: directory, recursive: true))
            }
            // The loop is busy making files (several events each, 4 times the queue) and reads none of them meanwhile.
            try harness.onLoop { [self] in
                for index in 0..<(queueLength * 4) { try write("x", to: "f\(index)") }
                try FileManager.default.createDirectory(atPath: path("made-meanwhile"), withIntermediateDirectories: false)
            }
            try watch.wait(for: "the overflow notice") { events in events.contains { $0.value?.kind == .eventsLost } }
            let notice = try XCTUnwrap(watch.values.first { $0.kind == .eventsLost })
            XCTAssertEqual(notice, FileEvent(kind: .eventsLost, name: ".", path: directory))
            XCTAssertLessThan(watch.values.count, queueLength * 4, "some events were lost indeed")

            try write("y", to: "made-meanwhile/after.txt")
            try watch.wait(for: "a file in the directory made while events were lost") { events in
                events.contains { $0.value?.name == "made-meanwhile/after.txt" }
            }
            XCTAssertNil(watch.terminal)
        }
    }

    /// A subdirectory the process may not read (as root the test drops to `nobody`): reported once as
    /// `.notWatched`, and the rest of the tree is watched.
    func testAnUnreadableSubdirectoryIsReportedAsNotWatched() throws {
        try FileManager.default.createDirectory(atPath: path("open"), withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: path("locked"), withIntermediateDirectories: false)
        chmod(path("locked"), 0)
        chmod(path("open"), 0o777)
        chmod(directory, 0o755)
        defer { chmod(path("locked"), 0o755) }
        // `nobody` may write in `open` only.
        try withoutRootPrivileges { try assertOnlyNotWatched("locked", thenSeesAFileMadeIn: "open") }
    }

    /// A subdirectory whose name is not UTF-8 (the byte 0xE9, Latin-1's "é"): a `String` cannot name
    /// it to inotify, so it is reported as `.notWatched` (its name shows U+FFFD), not skipped without
    /// a word as it was; the rest of the tree is watched.
    func testASubdirectoryWhoseNameIsNotUTF8IsReportedAsNotWatched() throws {
        try FileManager.default.createDirectory(atPath: path("ok"), withIntermediateDirectories: false)
        var latin1 = Array((directory + "/").utf8CString.dropLast()) + [CChar(bitPattern: 0xe9), 0]
        XCTAssertEqual(mkdir(&latin1, 0o755), 0)
        try assertOnlyNotWatched("\u{FFFD}", thenSeesAFileMadeIn: "ok")
    }

    /// The same for such a subdirectory made while the watch runs: its creation is reported, then
    /// `.notWatched` (before, its watch failed as if it were gone, and nothing more was said).
    func testASubdirectoryWhoseNameIsNotUTF8MadeLaterIsReportedAsNotWatched() throws {
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: directory, recursive: true))
            var latin1 = Array((directory + "/").utf8CString.dropLast()) + [CChar(bitPattern: 0xe8), 0]
            XCTAssertEqual(mkdir(&latin1, 0o755), 0)
            try watch.wait(for: ".notWatched") { events in events.contains { $0.value?.kind == .notWatched } }
            XCTAssertEqual(watch.values, [FileEvent(kind: .renamed, name: "\u{FFFD}", path: path("\u{FFFD}")),
                                          FileEvent(kind: .notWatched, name: "\u{FFFD}", path: path("\u{FFFD}"))])
            XCTAssertNil(watch.terminal)
        }
    }

    // MARK: - helpers

    /// A recursive watch of the directory whose only event at the start is `.notWatched` for
    /// `subdirectory`, and which then reports a file made in `watched`: the rest of the tree is watched.
    private func assertOnlyNotWatched(_ subdirectory: String, thenSeesAFileMadeIn watched: String,
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: directory, recursive: true))
            XCTAssertEqual(watch.values, [FileEvent(kind: .notWatched, name: subdirectory, path: path(subdirectory))], file: file, line: line)
            try write("x", to: watched + "/file")
            try watch.wait(for: watched + "/file") { events in events.contains { $0.value?.name == watched + "/file" } }
            XCTAssertNil(watch.terminal, file: file, line: line)
        }
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    private func write(_ text: String, to name: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path(name)))
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

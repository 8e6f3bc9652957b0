import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Renames under a directory watch: one `.moved` event when both names are watched, a deletion or a creation
/// when only one is. Each case ends with a sentinel file made in the watched directory: inotify reports in
/// order, so the events before the sentinel's are all the case caused (a count, never a time).
final class FileWatchMoveTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-moves-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/w", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory + "/out", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A file and a subdirectory renamed in a watched directory: one `.moved` each, with both names and paths.
    func testARenameWithinADirectoryIsOneMovedEvent() throws {
        try write("1", to: "w/a.txt")
        try makeDirectory("w/d")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: path("w")))
            XCTAssertEqual(rename(path("w/a.txt"), path("w/b.txt")), 0)
            XCTAssertEqual(rename(path("w/d"), path("w/e")), 0)
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w"), [
                FileEvent(kind: .moved, name: "b.txt", path: path("w/b.txt"), oldName: "a.txt", oldPath: path("w/a.txt")),
                FileEvent(kind: .moved, name: "e", path: path("w/e"), oldName: "d", oldPath: path("w/d")),
            ])
            XCTAssertEqual(watch.values.first?.description, "moved a.txt -> b.txt")
        }
    }

    /// A file and a directory moved from one subdirectory of a recursive watch to another: one `.moved` each.
    /// The directory keeps its watch (the same inodes are watched, no more), and what is made in it later is
    /// reported under its new path.
    func testARenameAcrossTwoDirectoriesOfARecursiveWatchIsOneMovedEvent() throws {
        try makeDirectory("w/x/sub")
        try makeDirectory("w/y")
        try write("1", to: "w/x/f")
        try write("2", to: "w/x/sub/inside")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: path("w"), recursive: true))
            let inodes = InotifyProbe.watchedInodesOfThisProcess()
            XCTAssertEqual(rename(path("w/x/f"), path("w/y/g")), 0)
            XCTAssertEqual(rename(path("w/x/sub"), path("w/y/sub2")), 0)
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w").map(\.description), ["moved x/f -> y/g", "moved x/sub -> y/sub2"])
            XCTAssertEqual(InotifyProbe.watchedInodesOfThisProcess(), inodes, "the same directories are watched")

            let seen = watch.values.count
            try write("3", to: "w/y/sub2/later")
            let later = try eventsBeforeSentinel(watch, "w", after: seen)
            XCTAssertEqual(later.first, FileEvent(kind: .renamed, name: "y/sub2/later", path: path("w/y/sub2/later")))
            XCTAssertTrue(later.allSatisfy { $0.name == "y/sub2/later" }, "\(later)")
            XCTAssertNil(watch.terminal)
        }
    }

    /// A directory renamed over an empty one (which `rename(2)` allows): one `.moved`; the replaced directory's
    /// watch is given up, the moved one's kept, and what is made in it is reported under the name.
    func testADirectoryRenamedOverAnEmptyOneKeepsItsWatchUnderTheName() throws {
        try makeDirectory("w/a")
        try makeDirectory("w/b")
        try write("1", to: "w/a/inside")
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try harness.record(FileWatch.changes(at: path("w"), recursive: true))
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 3, "w, a and b")
            XCTAssertEqual(rename(path("w/a"), path("w/b")), 0)
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w").map(\.description), ["moved a -> b"])
            try harness.wait(for: "the replaced directory's watch to go") { InotifyProbe.watchesOfThisProcess() - before == 2 }
            let seen = watch.values.count
            try write("2", to: "w/b/later")
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w", after: seen).first?.name, "b/later")
        }
    }

    /// A file moved out with nothing after it (its half waits for a read that never brings the other, then is
    /// reported alone), and a subdirectory moved out of a recursive watch: each a deletion, `.renamed` under the
    /// old name; the subdirectory is no longer watched.
    func testAnEntryMovedOutOfTheWatchIsADeletion() throws {
        try write("1", to: "w/f")
        try makeDirectory("w/sub")
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try harness.record(FileWatch.changes(at: path("w"), recursive: true))
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 2, "w and w/sub")
            XCTAssertEqual(rename(path("w/f"), path("out/f")), 0)
            try watch.wait(for: "renamed f") { events in events.contains { $0.value?.description == "renamed f" } }
            XCTAssertEqual(watch.values, [FileEvent(kind: .renamed, name: "f", path: path("w/f"))])

            XCTAssertEqual(rename(path("w/sub"), path("out/sub")), 0)
            try write("x", to: "out/sub/unwatched")
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w", after: 1), [FileEvent(kind: .renamed, name: "sub", path: path("w/sub"))])
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 1, "only w")
        }
    }

    /// A file and a directory holding a file moved in: each a creation, `.renamed` under the new name; the
    /// directory's entry is reported and the directory is watched.
    func testAnEntryMovedIntoTheWatchIsACreation() throws {
        try write("1", to: "out/f")
        try makeDirectory("out/d")
        try write("2", to: "out/d/inside")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: path("w"), recursive: true))
            XCTAssertEqual(rename(path("out/f"), path("w/f")), 0)
            XCTAssertEqual(rename(path("out/d"), path("w/d")), 0)
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w").map(\.description), ["renamed f", "renamed d", "renamed d/inside"])
            let seen = watch.values.count
            try write("3", to: "w/d/later")
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w", after: seen).first?.name, "d/later")
        }
    }

    /// A move out and a move in read together (the loop busy meanwhile), their halves next to each other with
    /// different cookies: a deletion and a creation, not one rename.
    func testAMoveOutAndAMoveInReadTogetherAreNotPaired() throws {
        try write("1", to: "w/a")
        try write("2", to: "out/b")
        try checked { harness in
            let watch = try harness.record(FileWatch.changes(at: path("w")))
            try harness.onLoop { [self] in
                XCTAssertEqual(rename(path("w/a"), path("out/a")), 0)
                XCTAssertEqual(rename(path("out/b"), path("w/b")), 0)
            }
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w").map(\.description), ["renamed a", "renamed b"])
        }
    }

    /// A tree of 5,000 files in 50 directories renamed in a recursive watch: one event, no directory read or
    /// watched again (the same inodes, as many watches), and changes inside reported under the new path.
    func testARenamed5000FileTreeIsOneEventAndStaysWatchedUnderItsNewName() throws {
        for directoryIndex in 0..<50 {
            try makeDirectory("w/tree/d\(directoryIndex)")
            for fileIndex in 0..<100 {
                XCTAssertTrue(FileManager.default.createFile(atPath: path("w/tree/d\(directoryIndex)/f\(fileIndex)"), contents: nil))
            }
        }
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try harness.record(FileWatch.changes(at: path("w"), recursive: true))
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 52, "w, tree and its 50 directories")
            let inodes = InotifyProbe.watchedInodesOfThisProcess()
            let listings = WatchedTree.listings.load(ordering: .relaxed)

            XCTAssertEqual(rename(path("w/tree"), path("w/renamed")), 0)
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w"),
                           [FileEvent(kind: .moved, name: "renamed", path: path("w/renamed"), oldName: "tree", oldPath: path("w/tree"))])
            XCTAssertEqual(WatchedTree.listings.load(ordering: .relaxed) - listings, 0, "no directory listed again")
            XCTAssertEqual(InotifyProbe.watchedInodesOfThisProcess(), inodes, "the same directories are watched")
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 52)

            let seen = watch.values.count
            try write("new", to: "w/renamed/d7/new.txt")
            try write("more", to: "w/renamed/d31/f5")
            let later = try eventsBeforeSentinel(watch, "w", after: seen)
            XCTAssertEqual(later.first, FileEvent(kind: .renamed, name: "renamed/d7/new.txt", path: path("w/renamed/d7/new.txt")))
            XCTAssertTrue(later.contains(FileEvent(kind: .changed, name: "renamed/d31/f5", path: path("w/renamed/d31/f5"))), "\(later)")
            XCTAssertTrue(later.allSatisfy { $0.name.hasPrefix("renamed/") }, "\(later)")
            XCTAssertNil(watch.terminal)
        }
    }

    /// A watched directory holding 10 subdirectories exchanged with a link to a directory outside the tree
    /// (`renameat2` `RENAME_EXCHANGE`) 101 times, then 99 more, all read together: the link's halves come
    /// after the directory's, and the queue lags the names. Each exchange is two `.moved` events; the same
    /// directories stay watched (none outside the tree), no directory is listed again, and a file made below
    /// the directory is reported under the name it has.
    func testADirectoryExchangedWithALinkManyTimesKeepsItsWatchesAndIsNeverListedAgain() throws {
        for index in 0..<10 {
            try makeDirectory("w/box/d/sub\(index)")
            try makeDirectory("out/victim/sub\(index)")
        }
        XCTAssertEqual(symlink(path("out/victim"), path("w/box/link")), 0)
        let exchange = try exchangeFunction()
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try harness.record(FileWatch.changes(at: path("w"), recursive: true))
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 13, "w, box, d and its 10 subdirectories")
            let inodes = InotifyProbe.watchedInodesOfThisProcess()
            let listings = WatchedTree.listings.load(ordering: .relaxed)
            var seen = 0
            for (count, directoryName) in [(101, "link"), (99, "d")] {
                // On the loop: every exchange is made before the watch reads the first of its events.
                try harness.onLoop { [self] in
                    for _ in 0..<count { XCTAssertEqual(exchange(path("w/box/d"), path("w/box/link")), 0) }
                }
                let events = try eventsBeforeSentinel(watch, "w", after: seen)
                XCTAssertEqual(events.count, count * 2)
                let others = events.filter { !($0.kind == .moved && Set([$0.oldName, $0.name]) == ["box/d", "box/link"]) }
                XCTAssertEqual(others.prefix(3), [], "\(others.count) events not an exchange's")
                XCTAssertEqual(WatchedTree.listings.load(ordering: .relaxed) - listings, 0, "no directory listed again")
                XCTAssertEqual(InotifyProbe.watchedInodesOfThisProcess(), inodes, "the same directories are watched")

                seen = watch.values.count
                try write("x", to: "w/box/\(directoryName)/sub3/made")
                XCTAssertEqual(try eventsBeforeSentinel(watch, "w", after: seen).first?.name, "box/\(directoryName)/sub3/made")
                seen = watch.values.count
            }
            XCTAssertNil(watch.terminal)
        }
    }

    /// Renames made while the loop is busy overflow the kernel's queue: `.eventsLost` is reported as for any
    /// other change, the renames read before it are paired (but a first half the overflow took the other half
    /// of, reported alone), and a rename after it is paired again.
    func testRenamesThatOverflowTheQueueAreReportedAsEventsLostAndPairingGoesOn() throws {
        try InotifyProbe.requireWritableLimit("max_queued_events")
        let queueLength = 64
        try write("1", to: "w/f0")
        try checked { harness in
            let watch = try InotifyProbe.withLimit("max_queued_events", setTo: queueLength) {
                try harness.record(FileWatch.changes(at: path("w")))
            }
            try harness.onLoop { [self] in
                for index in 0..<(queueLength * 2) { XCTAssertEqual(rename(path("w/f\(index)"), path("w/f\(index + 1)")), 0) }
            }
            try watch.wait(for: "the overflow notice") { events in events.contains { $0.value?.kind == .eventsLost } }
            let lost = try XCTUnwrap(watch.values.firstIndex { $0.kind == .eventsLost })
            XCTAssertEqual(watch.values[lost], FileEvent(kind: .eventsLost, name: ".", path: path("w")))
            let read = watch.values[..<lost]
            XCTAssertGreaterThan(read.count, 0)
            XCTAssertLessThan(read.count, queueLength * 2, "some renames were lost indeed")
            XCTAssertTrue(read.dropLast().allSatisfy { $0.kind == .moved }, "\(read)")
            XCTAssertTrue([.moved, .renamed].contains(read.last?.kind), "\(read)")

            let seen = watch.values.count
            let last = "f\(queueLength * 2)"
            XCTAssertEqual(rename(path("w/" + last), path("w/after")), 0)
            XCTAssertEqual(try eventsBeforeSentinel(watch, "w", after: seen).map(\.description), ["moved \(last) -> after"])
        }
    }

    // MARK: - helpers

    /// Makes a file named "sentinel-N" in `watched`, waits for its event, and returns the events from `index` up to it.
    private func eventsBeforeSentinel(_ watch: EventRecorder<FileEvent>, _ watched: String, after index: Int = 0) throws -> [FileEvent] {
        let name = "sentinel-\(UUID().uuidString.prefix(8))"
        try write("", to: watched + "/" + name)
        try watch.wait(for: "renamed \(name)") { events in
            events.compactMap(\.value).dropFirst(index).contains { $0.kind == .renamed && $0.name == name }
        }
        let values = watch.values
        let sentinel = try XCTUnwrap(values.indices.dropFirst(index).first { values[$0].name == name })
        return Array(values[index..<sentinel])
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    /// `renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)`; skips the test where it is missing or unsupported.
    private func exchangeFunction() throws -> @Sendable (String, String) -> Int32 {
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else {
            throw XCTSkip("this C library has no renameat2")
        }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        let exchange: @Sendable (String, String) -> Int32 = { renameat2(AT_FDCWD, $0, AT_FDCWD, $1, 2) }  // RENAME_EXCHANGE
        guard exchange(path("out"), path("w")) == 0, exchange(path("out"), path("w")) == 0 else {
            throw XCTSkip("this file system cannot exchange names (errno \(errno))")
        }
        return exchange
    }

    private func makeDirectory(_ name: String) throws {
        try FileManager.default.createDirectory(atPath: path(name), withIntermediateDirectories: true)
    }

    private func write(_ text: String, to name: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path(name)))
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

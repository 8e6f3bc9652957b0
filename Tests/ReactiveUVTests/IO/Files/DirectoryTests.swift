import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `Files.createDirectory`, `list`, `removeDirectory`, `remove`, `removeTree`, `makeTemporaryDirectory`.
final class DirectoryTests: FileSystemTestCase {
    func testCreateDirectoryWithModeAndItsErrors() throws {
        let made = path("made")
        try checked { harness in
            try completes(harness, Files.createDirectory(made, mode: 0o700))
            let info = try systemStat(made)
            XCTAssertEqual(info.st_mode & S_IFMT, S_IFDIR)
            XCTAssertEqual(UInt32(info.st_mode) & 0o777, 0o700)

            let again = try failure(harness, Files.createDirectory(made))
            XCTAssertEqual(again.name, "EEXIST")
            XCTAssertEqual(again.context, "mkdir \(made)")

            let missingParent = try failure(harness, Files.createDirectory(path("no/such/parent")))
            XCTAssertEqual(missingParent.name, "ENOENT")
            XCTAssertEqual(missingParent.context, "mkdir \(path("no/such/parent"))")

            let file = try makeFile("plain")
            let underFile = try failure(harness, Files.createDirectory(file + "/child"))
            XCTAssertEqual(underFile.name, "ENOTDIR")

            XCTAssertEqual(try failure(harness, Files.createDirectory(path("x"), mode: 0o10000)).name, "EINVAL")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("x")))
        }
    }

    /// A path whose parent directory does not exist is `ENOENT` with the call and the path in `context`, for every
    /// call that takes one, as source or as destination (a source then stays where it was); `exists` says false.
    func testAPathWhoseParentIsMissingIsENOENTNamingThePath() throws {
        let missing = path("no-such-dir") + "/entry"
        let file = try makeFile("here", [1, 2, 3])
        try checked { harness in
            let calls: [(Signal<Void>, String)] = [
                (Files.stat(missing).map { _ in () }, "stat \(missing)"),
                (Files.lstat(missing).map { _ in () }, "lstat \(missing)"),
                (Files.access(missing, .exists), "access \(missing)"),
                (Files.list(missing).map { _ in () }, "opendir \(missing)"),
                (Files.createDirectory(missing), "mkdir \(missing)"),
                (Files.remove(missing), "unlink \(missing)"),
                (Files.removeDirectory(missing), "rmdir \(missing)"),
                (Files.removeTree(missing), "lstat \(missing)"),
                (Files.rename(from: missing, to: path("moved")), "rename \(missing) -> \(path("moved"))"),
                (Files.rename(from: file, to: missing), "rename \(file) -> \(missing)"),
                (Files.copy(from: missing, to: path("copied")), "copyfile \(missing) -> \(path("copied"))"),
                (Files.copy(from: file, to: missing), "copyfile \(file) -> \(missing)"),
                (Files.link(at: missing, pointingTo: file), "link \(missing) -> \(file)"),
                (Files.symbolicLink(at: missing, pointingTo: file), "symlink \(missing) -> \(file)"),
                (Files.readLink(missing).map { _ in () }, "readlink \(missing)"),
                (Files.realPath(missing).map { _ in () }, "realpath \(missing)"),
                (Files.chmod(missing, 0o644), "chmod \(missing)"),
                (Files.chown(missing, user: getuid()), "chown \(missing)"),
                (Files.setTimes(missing, access: .zero, modification: .zero), "utimensat \(missing)"),
                (Files.truncate(missing, to: 0), "open \(missing)"),
                (Files.open(missing, mode: .write, options: [.create]).map { _ in () }, "open \(missing)"),
            ]
            for (signal, context) in calls {
                let error = try failure(harness, signal)
                XCTAssertEqual(error.name, "ENOENT", context)
                XCTAssertEqual(error.context, context)
            }
            let template = try failure(harness, Files.makeTemporaryFile(prefix: "t-", in: path("no-such-dir")).map { _ in () })
            XCTAssertEqual(template.name, "ENOENT")
            XCTAssertTrue(template.context.hasPrefix("mkstemp \(path("no-such-dir"))/t-"), template.description)
            XCTAssertEqual(try completes(harness, Files.exists(missing)), [false])
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), Data([1, 2, 3]), "the source stayed where it was")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["here"], "nothing was made")
    }

    /// A path through something that is not a directory (a file as a directory, or a name below a file) is
    /// `ENOTDIR` with the call and the path in `context`; `exists` of a name below a file is that error too (only
    /// `ENOENT` is `false`).
    func testAPathThroughAFileIsENOTDIRNamingThePath() throws {
        let file = try makeFile("plain", [1])
        let below = file + "/below"
        let other = try makeFile("other", [2])
        try checked { harness in
            let calls: [(Signal<Void>, String)] = [
                (Files.list(file).map { _ in () }, "opendir \(file)"),
                (Files.list(below).map { _ in () }, "opendir \(below)"),
                (Files.createDirectory(below), "mkdir \(below)"),
                (Files.exists(below).map { _ in () }, "access \(below)"),
                (Files.stat(below).map { _ in () }, "stat \(below)"),
                (Files.removeDirectory(file), "rmdir \(file)"),
                (Files.removeTree(below), "lstat \(below)"),
                (Files.rename(from: other, to: below), "rename \(other) -> \(below)"),
                (Files.copy(from: other, to: below), "copyfile \(other) -> \(below)"),
                (Files.open(below, mode: .write, options: [.create]).map { _ in () }, "open \(below)"),
            ]
            for (signal, context) in calls {
                let error = try failure(harness, signal)
                XCTAssertEqual(error.name, "ENOTDIR", context)
                XCTAssertEqual(error.context, context)
            }
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: other)), Data([2]), "the source stayed where it was")
        XCTAssertEqual(try systemStat(file).st_mode & S_IFMT, S_IFREG, "the file is still a file")
    }

    /// With parents: every missing level is made, an existing directory is fine, and a file in the way is an
    /// error naming it (EEXIST for the path itself, ENOTDIR for a parent).
    func testCreateDirectoryWithParentsIsMkdirP() throws {
        let deep = path("a/b/c/d")
        try checked { harness in
            try completes(harness, Files.createDirectory(deep, withParents: true))
            XCTAssertEqual(try systemStat(deep).st_mode & S_IFMT, S_IFDIR)
            try completes(harness, Files.createDirectory(deep, withParents: true))
            try completes(harness, Files.createDirectory(path("a/b") + "/", withParents: true))

            let file = try makeFile("a/file")
            let target = try failure(harness, Files.createDirectory(file, withParents: true))
            XCTAssertEqual(target.name, "EEXIST")
            XCTAssertTrue(target.message.contains(file) && target.message.contains("regular file"), target.description)

            let below = try failure(harness, Files.createDirectory(file + "/x/y", withParents: true))
            XCTAssertEqual(below.name, "ENOTDIR")
            XCTAssertTrue(below.message.contains(file) && below.message.contains("not a directory"), below.description)
            XCTAssertEqual(below.context, "mkdir -p \(file)/x/y")
        }
    }

    /// A symbolic link to nothing in the way of `mkdir -p` is named as what is in the way: `EEXIST` (the path
    /// itself) or `ENOTDIR` (a parent), "... exists and is a symbolic link to a path that does not exist".
    /// Before, the error was the `stat`'s `ENOENT` ("no such file or directory (stat PATH)"), which says the
    /// opposite of what stopped the call; a link to a directory is still followed, as `mkdir -p` does.
    func testCreateDirectoryWithParentsNamesADanglingLinkInTheWay() throws {
        let dangling = path("dangling")
        XCTAssertEqual(symlink(path("nowhere"), dangling), 0)
        try FileManager.default.createDirectory(atPath: path("real"), withIntermediateDirectories: false)
        XCTAssertEqual(symlink(path("real"), path("to-real")), 0)
        try checked { harness in
            let itself = try failure(harness, Files.createDirectory(dangling, withParents: true))
            XCTAssertEqual(itself.name, "EEXIST")
            XCTAssertEqual(itself.message, "\(dangling) exists and is a symbolic link to a path that does not exist, not a directory")
            XCTAssertEqual(itself.context, "mkdir -p \(dangling)")
            let below = try failure(harness, Files.createDirectory(dangling + "/x/y", withParents: true))
            XCTAssertEqual(below.name, "ENOTDIR")
            XCTAssertEqual(below.message, "\(dangling) exists and is a symbolic link to a path that does not exist, not a directory")
            XCTAssertEqual(below.context, "mkdir -p \(dangling)/x/y")
            XCTAssertThrowsError(try systemStat(path("nowhere")), "the link's target was not made")
            try completes(harness, Files.createDirectory(path("to-real/x/y"), withParents: true))
            XCTAssertEqual(try systemStat(path("real/x/y")).st_mode & S_IFMT, S_IFDIR)
        }
    }

    /// Names come out as `String(cString:)` would make them: long ones (past a small string's 15
    /// bytes), multi-byte UTF-8, and bytes that are not UTF-8 (Linux allows any byte but `/` and NUL),
    /// which are repaired to U+FFFD rather than dropped or crashing the pool thread.
    func testListedNamesAreTheNamesOnDiskAsStrings() throws {
        let listed = path("names")
        try FileManager.default.createDirectory(atPath: listed, withIntermediateDirectories: false)
        let raw: [[UInt8]] = [Array("a".utf8), Array("a-name-longer-than-fifteen-bytes".utf8), Array("café ☕".utf8),
                              [0x62, 0xFF, 0x63], [0xC3], Array(repeating: 0x7A, count: 255)]
        for name in raw {
            let full = Array(listed.utf8) + [0x2F] + name + [0]
            let descriptor = full.withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644) }
            }
            XCTAssertGreaterThanOrEqual(descriptor, 0, "could not create a file named \(name)")
            close(descriptor)
        }
        let expected = raw.map { name in (name + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { String(cString: $0.baseAddress!) } } }
        XCTAssertTrue(expected.contains("b\u{FFFD}c"), "\(expected)")
        try checked { harness in
            let names = try completes(harness, Files.list(listed).map(\.name))
            XCTAssertEqual(names.sorted(), expected.sorted())
        }
    }

    /// 10,000 entries arrive complete, each with its type, in several batches (never all at once).
    func testListingTenThousandEntriesArrivesInBatches() throws {
        let listed = path("many")
        try FileManager.default.createDirectory(atPath: listed, withIntermediateDirectories: false)
        for index in 0..<9_998 {
            XCTAssertTrue(FileManager.default.createFile(atPath: listed + "/f\(index)", contents: nil))
        }
        try FileManager.default.createDirectory(atPath: listed + "/sub", withIntermediateDirectories: false)
        XCTAssertEqual(symlink(listed + "/sub", listed + "/link"), 0)
        try checked { harness in
            let batches = Locked<[Int]>([])
            let recorder = try harness.record(Files.list(listed, batchSize: Files.listBatchSize, on: nil,
                                                         afterEachBatch: { count in batches.withLock { $0.append(count) } }))
            // 10,000 entries through the recorder take seconds under the thread sanitizer on a loaded machine.
            XCTAssertTrue(try recorder.waitForTermination(timeout: .seconds(60)).isCompleted)
            let entries = recorder.values
            XCTAssertEqual(entries.count, 10_000)
            XCTAssertEqual(Set(entries.map(\.name)).count, 10_000, "each entry once")
            XCTAssertFalse(entries.contains { $0.name == "." || $0.name == ".." })
            let types = Dictionary(entries.map { ($0.name, $0.type) }, uniquingKeysWith: { first, _ in first })
            XCTAssertEqual(types["sub"], .directory)
            XCTAssertEqual(types["link"], .symbolicLink)
            XCTAssertEqual(types["f42"], .regular)
            XCTAssertGreaterThanOrEqual(batches.current.count, 10_000 / Files.listBatchSize, "\(batches.current.count) batches")
            XCTAssertTrue(batches.current.allSatisfy { $0 <= Files.listBatchSize })
            XCTAssertEqual(batches.current.reduce(0, +), 10_000)

            XCTAssertEqual(try completes(harness, Files.list(listed + "/sub")).count, 0)
            XCTAssertEqual(try failure(harness, Files.list(listed + "/f1")).name, "ENOTDIR")
            let missing = try failure(harness, Files.list(path("missing")))
            XCTAssertEqual(missing.name, "ENOENT")
            XCTAssertEqual(missing.context, "opendir \(path("missing"))")
        }
    }

    /// The next readdir runs while a batch is delivered; a consumer's pause stops the one after it: the batch in
    /// hand is delivered, the batch read ahead is held, and no request is pending until it resumes; disposing a
    /// listing part-way closes the directory.
    func testAPausedListingIssuesNoReadUntilResumedAndDisposeClosesIt() throws {
        let listed = path("paused")
        try FileManager.default.createDirectory(atPath: listed, withIntermediateDirectories: false)
        for index in 0..<100 {
            XCTAssertTrue(FileManager.default.createFile(atPath: listed + "/f\(index)", contents: nil))
        }
        try checked { harness in
            let loop = harness.loop
            let received = Locked(0)
            let batches = Locked(0)
            let reads = Locked(0)
            let readAheadDuringFirstBatch = Locked<Bool?>(nil)
            let subscription = Locked<Subscription?>(nil)
            let completed = Locked(false)
            try harness.onLoop {
                let disposable = Files.list(listed, batchSize: 10, on: nil, afterEachBatch: { _ in batches.withLock { $0 += 1 } },
                                            afterEachRead: { _ in reads.withLock { $0 += 1 } })
                    .subscribe(next: { _ in
                        let count = received.withLock { $0 += 1; return $0 }
                        if count == 1 { readAheadDuringFirstBatch.withLock { $0 = !loop.requests.isEmpty } }
                        if count == 3 { subscription.current?.flowControl?.pause() }
                    }, completed: { completed.withLock { $0 = true } })
                subscription.withLock { $0 = disposable as? Subscription }
            }
            XCTAssertNotNil(subscription.current)
            try harness.wait(for: "the first batch") { batches.current >= 1 }
            // The second batch was read ahead while the first was delivered; it arrives and is held.
            try harness.wait(for: "the batch read ahead to call back") { reads.current >= 2 }
            XCTAssertEqual(try harness.onLoop { loop.requests.isEmpty }, true, "no readdir pending while paused")
            XCTAssertEqual(readAheadDuringFirstBatch.current, true, "the next readdir runs while the first batch is delivered")
            XCTAssertEqual(reads.current, 2, "one batch read ahead, no more while paused")
            XCTAssertEqual(batches.current, 1)
            XCTAssertEqual(received.current, 10, "the batch in hand is delivered whole, the one read ahead is held")
            XCTAssertGreaterThan(try descriptors(openOn: listed), 0, "the directory is still open")
            try harness.onLoop { subscription.current?.flowControl?.resume() }
            try harness.wait(for: "the listing to complete") { completed.current }
            XCTAssertEqual(received.current, 100)
            XCTAssertEqual(try descriptors(openOn: listed), 0, "closed at the end")

            // A listing paused part way (so it cannot finish first, however fast the loop) holds its
            // directory open until disposed.
            let partedCount = Locked(0)
            let parted = Locked<Subscription?>(nil)
            try harness.onLoop {
                let disposable = Files.list(listed, batchSize: 1, on: nil, afterEachBatch: nil).subscribe(next: { _ in
                    if partedCount.withLock({ $0 += 1; return $0 }) == 5 { parted.current?.flowControl?.pause() }
                })
                parted.withLock { $0 = disposable as? Subscription }
            }
            try harness.wait(for: "five entries") { partedCount.current >= 5 }
            XCTAssertGreaterThan(try descriptors(openOn: listed), 0, "a paused listing keeps its directory open")
            try harness.onLoop { parted.current?.dispose() }
            try harness.waitOrThrow(for: "the directory to be closed") { try descriptors(openOn: listed) == 0 }
        }
    }

    /// A loop that shuts down while a listing's consumer has paused it (a batch held, no readdir pending)
    /// ends that consumer with `EventLoopError.shutDown` and closes the directory.
    func testShutdownEndsAPausedListingAndClosesTheDirectory() async throws {
        let listed = path("paused-shutdown")
        try FileManager.default.createDirectory(atPath: listed, withIntermediateDirectories: false)
        for index in 0..<3_000 {
            XCTAssertTrue(FileManager.default.createFile(atPath: listed + "/f\(index)", contents: nil))
        }
        let loop = EventLoop(name: "paused-listing")
        try await assertAPausedReaderEndsWithShutDown(Files.list(listed, on: loop), on: loop)
        XCTAssertEqual(try descriptors(openOn: listed), 0, "the directory is still open after the loop shut down")
    }

    /// A batch goes out as one delivery (`Subscriber.sendNexts`), yet a subscriber that disposes inside an entry
    /// gets no further entry, from that batch or a later one; through an operator every entry still arrives.
    func testASubscriberDisposingInsideABatchGetsNoMoreEntries() throws {
        let listed = path("burst")
        try FileManager.default.createDirectory(atPath: listed, withIntermediateDirectories: false)
        for index in 0..<40 {
            XCTAssertTrue(FileManager.default.createFile(atPath: listed + "/f\(index)", contents: nil))
        }
        try checked { harness in
            let received = Locked(0)
            let subscription = Locked<(any Disposable)?>(nil)
            try harness.onLoop {
                subscription.withLock {
                    $0 = Files.list(listed, batchSize: 20, on: nil, afterEachBatch: nil).subscribe(next: { _ in
                        if received.withLock({ $0 += 1; return $0 }) == 3 { subscription.current?.dispose() }
                    })
                }
            }
            // A second listing on the same loop completes after the first one's batch was delivered.
            let whole = try completes(harness, Files.list(listed, batchSize: 20, on: nil, afterEachBatch: nil).map(\.name))
            XCTAssertEqual(Set(whole).count, 40, "through an operator every entry arrives once")
            try harness.waitOrThrow(for: "the disposed listing to close its directory") { try descriptors(openOn: listed) == 0 }
            XCTAssertEqual(received.current, 3, "nothing after the dispose inside the third entry")
        }
    }

    /// Listings and temporary directories disposed at once, while their opendir/mkdtemp is queued or running:
    /// a result that comes after the dispose is undone in its callback (the directory stream closed, the new
    /// directory removed), so no descriptor and no directory is left behind.
    func testResultsArrivingAfterDisposeAreUndone() throws {
        let listed = path("disposed")
        try FileManager.default.createDirectory(atPath: listed, withIntermediateDirectories: false)
        let prefix = path("tmp-")
        try checked { harness in
            try harness.onLoop {
                for _ in 0..<200 {
                    Files.list(listed).subscribe().dispose()
                    Files.makeTemporaryDirectory(prefix: prefix).subscribe().dispose()
                }
            }
            try harness.waitOrThrow(for: "every directory stream to be closed") { try descriptors(openOn: listed) == 0 }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("tmp-") }
        XCTAssertEqual(left, [], "temporary directories made for disposed subscribers are removed")
    }

    /// A temporary file or directory whose subscriber is disposed on another thread after the pool made it,
    /// before the loop took the result, is removed again: the subscription is marked disposed at once and
    /// its teardown comes later, so the result used to be sent to a subscriber that dropped it, and the
    /// file (mkstemp) or directory (mkdtemp) stayed on disk under a name nobody was told. A temporary file
    /// made after a dispose on the loop was closed but stayed too.
    func testTemporaryEntriesMadeForASubscriberDisposedElsewhereAreRemoved() throws {
        let place = path("place")
        try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: false)
        func entries() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: place)) ?? [] }
        try checked { harness in
            for _ in 0..<20 {
                // The loop is held while the pool makes both and another thread disposes them, so the
                // results and the disposals reach the loop after the subscriptions were marked disposed.
                try harness.onLoop {
                    let subscriptions = [Files.makeTemporaryFile(prefix: "file-", in: place).subscribe(),
                                         Files.makeTemporaryDirectory(prefix: place + "/dir-").subscribe()]
                    while entries().count < 2 { sched_yield() }
                    let disposed = DispatchSemaphore(value: 0)
                    DispatchQueue.global().async {
                        subscriptions.forEach { $0.dispose() }
                        disposed.signal()
                    }
                    disposed.wait()
                }
                try harness.wait(for: "the temporary file and directory to be removed") { entries().isEmpty }
            }
            // On the loop, disposed as soon as subscribed: what the pool made before the cancel is removed too.
            try harness.onLoop {
                for _ in 0..<100 { Files.makeTemporaryFile(prefix: "file-", in: place).subscribe().dispose() }
            }
            try harness.wait(for: "every temporary file to be removed") { entries().isEmpty }
        }
    }

    /// A tree deeper than a path can be long (`PATH_MAX`, 4,096 bytes: what a copy made inside its own
    /// source grows to) is removed whole, as `rm -r` removes it: 30 levels of 200-byte names, and 2,500
    /// levels of one letter, each level with a file and a link to a directory outside (which keeps its
    /// file). Before, the first path past the limit failed with `ENAMETOOLONG` ("scandir" of a 4,000-byte
    /// path) with the tree half removed. No descriptor is left open on the tree afterwards.
    func testRemoveTreeRemovesATreeDeeperThanAPathCanBeLong() throws {
        let outside = path("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: false)
        _ = try makeFile("outside/keep")
        /// Made with `mkdirat`/`openat`, one level at a time: no path call could reach the bottom.
        func makeTree(_ root: String, levels: Int, name: String) throws {
            XCTAssertEqual(mkdir(root, 0o755), 0)
            var level = open(root, O_RDONLY | O_DIRECTORY)
            for _ in 0..<levels {
                XCTAssertEqual(mkdirat(level, name, 0o755), 0)
                XCTAssertEqual(symlinkat(outside, level, "link"), 0)
                let file = openat(level, "file", O_CREAT | O_WRONLY, 0o644)
                XCTAssertGreaterThanOrEqual(file, 0)
                close(file)
                let next = openat(level, name, O_RDONLY | O_DIRECTORY)
                close(level)
                level = next
            }
            XCTAssertGreaterThanOrEqual(level, 0)
            close(level)
        }
        let longNames = path("long-names"), manyLevels = path("many-levels")
        try makeTree(longNames, levels: 30, name: String(repeating: "d", count: 200))
        try makeTree(manyLevels, levels: 2_500, name: "d")
        func descriptorsOnTheTrees() throws -> Int {
            try openDescriptorTargets().filter { $0.hasPrefix(longNames) || $0.hasPrefix(manyLevels) }.count
        }
        try checked { harness in
            try completes(harness, Files.removeTree(longNames))
            try completes(harness, Files.removeTree(manyLevels))
        }
        XCTAssertThrowsError(try systemStat(longNames))
        XCTAssertThrowsError(try systemStat(manyLevels))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside), ["keep"], "links are never followed")
        XCTAssertEqual(try descriptorsOnTheTrees(), 0)
    }

    func testRemoveRemoveDirectoryAndTheirErrors() throws {
        let file = try makeFile("gone")
        let full = path("full")
        try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: false)
        _ = try makeFile("full/inside")
        try checked { harness in
            try completes(harness, Files.remove(file))
            XCTAssertFalse(FileManager.default.fileExists(atPath: file))
            let notEmpty = try failure(harness, Files.removeDirectory(full))
            XCTAssertEqual(notEmpty.name, "ENOTEMPTY")
            XCTAssertEqual(notEmpty.context, "rmdir \(full)")
            XCTAssertEqual(try failure(harness, Files.removeDirectory(full + "/inside")).name, "ENOTDIR")
            let directoryRemoved = try failure(harness, Files.remove(full))
            XCTAssertEqual(directoryRemoved.name, "EISDIR")
            XCTAssertEqual(directoryRemoved.context, "unlink \(full)")
            XCTAssertTrue(FileManager.default.fileExists(atPath: full + "/inside"), "nothing was removed")
            try completes(harness, Files.remove(full + "/inside"))
            try completes(harness, Files.removeDirectory(full))
            XCTAssertFalse(FileManager.default.fileExists(atPath: full))
        }
    }

    /// A whole tree goes, depth first; a link to a directory outside is unlinked and its target keeps every file;
    /// removing a link itself leaves its target.
    func testRemoveTreeNeverFollowsSymbolicLinks() throws {
        let outside = path("outside")
        try FileManager.default.createDirectory(atPath: outside + "/deep", withIntermediateDirectories: true)
        _ = try makeFile("outside/keep")
        _ = try makeFile("outside/deep/keep")
        let tree = path("tree")
        try FileManager.default.createDirectory(atPath: tree + "/a/b/c", withIntermediateDirectories: true)
        for name in ["tree/top", "tree/a/one", "tree/a/b/two", "tree/a/b/c/three"] { _ = try makeFile(name) }
        XCTAssertEqual(symlink(outside, tree + "/a/b/to-outside"), 0)
        XCTAssertEqual(symlink(outside + "/keep", tree + "/to-file"), 0)
        XCTAssertEqual(mkfifo(tree + "/a/fifo", 0o600), 0)
        let linkToOutside = path("link-to-outside")
        XCTAssertEqual(symlink(outside, linkToOutside), 0)
        try checked { harness in
            try completes(harness, Files.removeTree(tree))
            XCTAssertFalse(FileManager.default.fileExists(atPath: tree))
            try completes(harness, Files.removeTree(linkToOutside))
            XCTAssertThrowsError(try systemStat(linkToOutside), "the link is gone")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside).sorted(), ["deep", "keep"])
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside + "/deep"), ["keep"])

            let single = try makeFile("single")
            try completes(harness, Files.removeTree(single))
            XCTAssertFalse(FileManager.default.fileExists(atPath: single))
            let missing = try failure(harness, Files.removeTree(path("missing")))
            XCTAssertEqual(missing.name, "ENOENT")
            XCTAssertEqual(missing.context, "lstat \(path("missing"))")
        }
    }

    /// A link to a directory named with a trailing slash (`link/`, as shell completion writes it) is
    /// the link: it is unlinked and the directory it points to keeps every file. The slash makes the
    /// kernel follow the link, so `lstat("link/")` described the target: its entries were removed,
    /// then the removal failed with `ENOTDIR` on `rmdir link/`, the link still there.
    func testRemoveTreeOfALinkNamedWithATrailingSlashRemovesOnlyTheLink() throws {
        let target = path("target")
        try FileManager.default.createDirectory(atPath: target + "/sub", withIntermediateDirectories: true)
        _ = try makeFile("target/keep")
        _ = try makeFile("target/sub/keep")
        XCTAssertEqual(symlink(target, path("link")), 0)
        XCTAssertEqual(symlink(target, path("other-link")), 0)
        let realDirectory = path("real")
        try FileManager.default.createDirectory(atPath: realDirectory, withIntermediateDirectories: true)
        _ = try makeFile("real/inside")
        try checked { harness in
            try completes(harness, Files.removeTree(path("link") + "/"))
            XCTAssertThrowsError(try systemStat(path("link")), "the link is gone")
            try completes(harness, Files.removeTree(path("other-link") + "///"))
            XCTAssertThrowsError(try systemStat(path("other-link")), "the link is gone")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: target).sorted(), ["keep", "sub"])
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: target + "/sub"), ["keep"])
            // A real directory named with a slash is removed with its tree, as without one.
            try completes(harness, Files.removeTree(realDirectory + "/"))
            XCTAssertFalse(FileManager.default.fileExists(atPath: realDirectory))
            // A file named with a slash is not a directory, as the system says.
            let file = try makeFile("file")
            XCTAssertEqual(try failure(harness, Files.removeTree(file + "/")).name, "ENOTDIR")
            XCTAssertEqual(try failure(harness, Files.removeTree(path("missing") + "/")).name, "ENOENT")
        }
    }

    /// A name that is not UTF-8 (bytes 0xFF 0xFE, as an old archive's Latin-1 names are) is removed
    /// with its tree: the removal builds paths from the names' bytes. Through a `String` the name
    /// became U+FFFD twice, its unlink found nothing, and the removal failed with `ENOTEMPTY`.
    /// (`list` shows such a name with U+FFFD, as documented on `DirectoryEntry.name`.)
    func testRemoveTreeRemovesEntriesWhoseNamesAreNotUTF8() throws {
        let tree = path("latin1")
        try FileManager.default.createDirectory(atPath: tree + "/sub", withIntermediateDirectories: true)
        for directory in [tree, tree + "/sub"] {
            var name = Array((directory + "/").utf8CString.dropLast()) + [CChar(bitPattern: 0xff), CChar(bitPattern: 0xfe), 0x61, 0]
            let descriptor = open(&name, O_CREAT | O_WRONLY, 0o600)
            XCTAssertGreaterThanOrEqual(descriptor, 0)
            close(descriptor)
        }
        var nameDirectory = Array((tree + "/").utf8CString.dropLast()) + [CChar(bitPattern: 0xe9), 0]
        XCTAssertEqual(mkdir(&nameDirectory, 0o700), 0)
        try checked { harness in
            let listed = try completes(harness, Files.list(tree + "/sub"))
            XCTAssertEqual(listed.map(\.name), ["\u{FFFD}\u{FFFD}a"])
            try completes(harness, Files.removeTree(tree))
            XCTAssertFalse(FileManager.default.fileExists(atPath: tree))
        }
    }

    /// As `rm -r` does, `removeTree` refuses a path ending in `.` or `..` at the door (`EINVAL`,
    /// nothing removed: without the check, `sub/..` would empty its parent), and the root directory,
    /// by name at the door and by identity for a path that only resolves to it. The root is never
    /// handed to `removeTree` here (a broken check would remove everything): its refusal is checked
    /// on the two internal checks `removeTree` runs, the door's and the identity comparison.
    func testRemoveTreeRefusesTheRootDirectoryAndPathsEndingInDotOrDotDot() throws {
        let sub = path("sub")
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        let kept = try makeFile("sub/kept")
        try checked { harness in
            for refused in [sub + "/..", sub + "/../", sub + "/.", sub + "/./"] {
                let error = try failure(harness, Files.removeTree(refused))
                XCTAssertEqual(error.name, "EINVAL", refused)
                XCTAssertEqual(error.context, "removeTree \(refused)")
                XCTAssertTrue(error.message.contains("refusing to remove a path ending in '.' or '..'"), error.description)
                XCTAssertTrue(FileManager.default.fileExists(atPath: kept), "\(refused) removed something")
            }
        }
        for root in ["/", "//", "///"] {
            let error = try XCTUnwrap(TreeRemoval.refusal(of: root), root)
            XCTAssertTrue(error.message.contains("refusing to remove the root directory"), error.description)
        }
        for refused in [".", "..", "./", "a/.", "a/..", "/..", "/.", "/tmp/.."] {
            XCTAssertNotNil(TreeRemoval.refusal(of: refused), refused)
        }
        for allowed in ["a", "/tmp/x", ".hidden", "a/..b", "a/.b", "...", "a/b/"] {
            XCTAssertNil(TreeRemoval.refusal(of: allowed), allowed)
        }
        // The identity check: a link to / followed by a trailing slash is the root directory.
        let linkToRoot = path("to-root")
        XCTAssertEqual(symlink("/", linkToRoot), 0)
        let rootInfo = try XCTUnwrap(try Files.stat("/").first())
        let throughLink = try XCTUnwrap(try Files.lstat(linkToRoot + "/").first())
        XCTAssertTrue(TreeRemoval.isSameFile(throughLink, rootInfo))
        XCTAssertFalse(TreeRemoval.isSameFile(try XCTUnwrap(try Files.lstat(sub).first()), rootInfo))
        XCTAssertNil(TreeRemoval.refusal(of: linkToRoot + "/"), "only the identity check can see this one")
    }

    /// A directory `nobody` cannot write: creating in it, removing from it and a tree below it are EACCES,
    /// naming the path, and nothing is half-removed silently.
    func testPermissionDeniedIsEACCESNamingThePath() throws {
        let locked = path("locked")
        try FileManager.default.createDirectory(atPath: locked + "/sub", withIntermediateDirectories: true)
        _ = try makeFile("locked/sub/file")
        XCTAssertEqual(Foundation.chmod(locked, 0o555), 0)
        XCTAssertEqual(Foundation.chmod(directory, 0o755), 0)
        try withoutRootPrivileges {
            try checked { harness in
                let create = try failure(harness, Files.createDirectory(locked + "/new"))
                XCTAssertEqual(create.name, "EACCES")
                XCTAssertEqual(create.context, "mkdir \(locked)/new")
                let tree = try failure(harness, Files.removeTree(locked + "/sub"))
                XCTAssertEqual(tree.name, "EACCES")
                XCTAssertEqual(tree.context, "unlink \(locked)/sub/file")
            }
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: locked + "/sub/file"))
    }

    /// Set in the child process `testMakeTemporaryDirectory` starts (its `$TMPDIR` a directory of the test's own).
    private static let temporaryDirectoryProbe = "REACTIVEUV_MKDTEMP_PROBE"

    /// mkdtemp: a new empty directory of mode 0o700, in `$TMPDIR` for a bare prefix, where asked for a path prefix.
    ///
    /// The bare prefix runs in a child process (this test again) whose `$TMPDIR` is a directory inside this
    /// test's own, so nothing is made in the real one, and whatever the child leaves goes with the test's
    /// directory, failed or not. (`$TMPDIR` is read when the signal is made; `setenv` in this process would race
    /// with the other threads reading the environment.)
    func testMakeTemporaryDirectory() throws {
        if ProcessInfo.processInfo.environment[Self.temporaryDirectoryProbe] != nil { return try makeOneInTMPDIR() }
        let tmpdir = path("tmpdir")
        try FileManager.default.createDirectory(atPath: tmpdir, withIntermediateDirectories: false)
        let output = try runTestInFreshProcess("DirectoryTests/testMakeTemporaryDirectory",
                                               environment: ["TMPDIR": tmpdir, Self.temporaryDirectoryProbe: "1"])
        let probe = try XCTUnwrap(output.split(separator: "\n").first { $0.hasPrefix("mkdtemp probe: ") }, output)
        let made = String(probe.dropFirst("mkdtemp probe: ".count))
        XCTAssertTrue(made.hasPrefix(tmpdir + "/fsmeta-"), made)
        XCTAssertEqual(made.count, tmpdir.count + "/fsmeta-".count + 6, made)
        let info = try systemStat(made)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(UInt32(info.st_mode) & 0o777, 0o700)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: made), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: tmpdir), [URL(fileURLWithPath: made).lastPathComponent],
                       "the child made its directory in $TMPDIR, and nothing else is left there")

        try checked { harness in
            let here = try XCTUnwrap(try completes(harness, Files.makeTemporaryDirectory(prefix: path("own-"))).first)
            XCTAssertTrue(here.hasPrefix(path("own-")), here)
            XCTAssertEqual(here.count, path("own-").count + 6, here)
            XCTAssertEqual(UInt32(try systemStat(here).st_mode) & 0o777, 0o700)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: here), [])
            let again = try XCTUnwrap(try completes(harness, Files.makeTemporaryDirectory(prefix: path("own-"))).first)
            XCTAssertNotEqual(again, here)
            XCTAssertEqual(try failure(harness, Files.makeTemporaryDirectory(prefix: path("none/x-"))).name, "ENOENT")
        }
    }

    /// In the child: makes a directory with a bare prefix and prints its path for the parent to check.
    private func makeOneInTMPDIR() throws {
        try checked { harness in
            let made = try XCTUnwrap(try completes(harness, Files.makeTemporaryDirectory(prefix: "fsmeta-")).first)
            print("mkdtemp probe: \(made)")
        }
    }
}

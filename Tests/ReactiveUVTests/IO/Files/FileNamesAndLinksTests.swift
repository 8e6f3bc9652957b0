import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `Files.rename`, `copy`, `link`, `symbolicLink`, `readLink`, `realPath`, and the async forms of `FileSystem`.
final class FileNamesAndLinksTests: FileSystemTestCase {
    func testRenameMovesAndNamesBothPathsInErrors() throws {
        let source = try makeFile("before", [4, 5, 6])
        let destination = path("after")
        let inode = try systemStat(source).st_ino
        try checked { harness in
            try completes(harness, Files.rename(from: source, to: destination))
            XCTAssertFalse(FileManager.default.fileExists(atPath: source))
            XCTAssertEqual(try systemStat(destination).st_ino, inode, "the same file under a new name")
            let missing = try failure(harness, Files.rename(from: source, to: destination))
            XCTAssertEqual(missing.name, "ENOENT")
            XCTAssertEqual(missing.context, "rename \(source) -> \(destination)")
        }
    }

    /// /tmp and /dev/shm are different file systems on Linux: rename across them is EXDEV, and the file stays.
    func testRenameAcrossFileSystemsIsEXDEV() throws {
        let source = try makeFile("crossing")
        guard let shm = try? systemStat("/dev/shm", followLinks: true) else { throw XCTSkip("no /dev/shm on this machine") }
        guard shm.st_dev != (try systemStat(directory)).st_dev else {
            throw XCTSkip("/dev/shm and \(directory) are on the same device here, so no rename between them crosses file systems")
        }
        let destination = "/dev/shm/reactiveuv-exdev-" + UUID().uuidString
        defer { unlink(destination) }
        try checked { harness in
            let error = try failure(harness, Files.rename(from: source, to: destination))
            XCTAssertEqual(error.name, "EXDEV")
            XCTAssertEqual(error.context, "rename \(source) -> \(destination)")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: source))
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination))
    }

    /// copy makes a second file with the same bytes and mode; it never replaces a file unless asked.
    func testCopyNeverOverwritesUnlessAsked() throws {
        let contents = bytePattern(200_000, seed: 9)
        let source = try makeFile("original", contents)
        XCTAssertEqual(Foundation.chmod(source, 0o640), 0)
        let destination = path("copy")
        try checked { harness in
            try completes(harness, Files.copy(from: source, to: destination))
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: destination)), Data(contents))
            XCTAssertNotEqual(try systemStat(destination).st_ino, try systemStat(source).st_ino)
            XCTAssertEqual(UInt32(try systemStat(destination).st_mode) & 0o777, 0o640)

            let other = try makeFile("other", [1])
            let refused = try failure(harness, Files.copy(from: other, to: destination))
            XCTAssertEqual(refused.name, "EEXIST")
            XCTAssertEqual(refused.context, "copyfile \(other) -> \(destination)")
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: destination)), Data(contents), "left as it was")

            try completes(harness, Files.copy(from: other, to: destination, overwrite: true))
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: destination)), Data([1]))
            XCTAssertEqual(try failure(harness, Files.copy(from: directory, to: path("dircopy"))).name, "EISDIR")
        }
    }

    /// libuv's copy sends as many bytes as the source's `stat` size: a `/proc` file (size 0, full of bytes)
    /// was copied as an empty file and the copy completed; a FIFO held a pool thread in its `open` until a
    /// writer came, then was copied as an empty file too. Both, and a device, are `EINVAL` saying why, with
    /// nothing made at the destination; an empty regular file is still copied.
    func testCopyOfASourceWhoseSizeDoesNotSayWhatItHoldsIsEINVAL() throws {
        let fifo = path("fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let empty = try makeFile("empty", [])
        try checked { harness in
            for (source, saying) in [("/proc/self/status", "says its size is 0 but holds bytes"), (fifo, "is a FIFO, not a regular file"),
                                     ("/dev/zero", "is a character device, not a regular file")] {
                let destination = path("copy")
                let error = try failure(harness, Files.copy(from: source, to: destination))
                XCTAssertEqual(error.name, "EINVAL", source)
                XCTAssertTrue(error.message.contains(saying), error.description)
                XCTAssertEqual(error.context, "copyfile \(source) -> \(destination)")
                XCTAssertThrowsError(try systemStat(destination), "nothing was made for \(source)")
            }
            try completes(harness, Files.copy(from: empty, to: path("empty-copy")))
            XCTAssertEqual(try systemStat(path("empty-copy")).st_size, 0)
        }
    }

    /// `copy(overwrite: true)` onto an existing destination that is not a regular file: a FIFO (with a reader),
    /// a link to it, and (as root) a character device node like `/dev/null` made in the test's directory.
    /// libuv's copy changed its mode, truncated it, and when the truncation failed (`EINVAL`) removed it:
    /// copying onto `/dev/null` as root deleted `/dev/null`. Each is now `EINVAL` naming its type, and left
    /// as it was (type and mode).
    func testCopyOverwritingSomethingThatIsNotARegularFileLeavesItAlone() throws {
        let source = try makeFile("source", [1, 2, 3])
        let fifo = path("fifo")
        XCTAssertEqual(mkfifo(fifo, 0o640), 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        XCTAssertEqual(symlink(fifo, path("to-fifo")), 0)
        var destinations = [(fifo, "is a FIFO"), (path("to-fifo"), "is a FIFO")]
        if geteuid() == 0 {
            // Device 1:3 (the null device), in the old encoding Linux still reads for small numbers.
            XCTAssertEqual(mknod(path("null"), S_IFCHR | 0o666, dev_t(1 << 8 | 3)), 0)
            destinations.append((path("null"), "is a character device"))
        }
        try checked { harness in
            for (destination, saying) in destinations {
                let before = try systemStat(destination)
                let error = try failure(harness, Files.copy(from: source, to: destination, overwrite: true))
                XCTAssertEqual(error.name, "EINVAL", destination)
                XCTAssertTrue(error.message.contains(saying), error.description)
                XCTAssertEqual(error.context, "copyfile \(source) -> \(destination)")
                let after = try systemStat(destination)
                XCTAssertEqual(after.st_mode, before.st_mode, "\(destination) is still there, as it was")
                XCTAssertEqual(after.st_ino, before.st_ino)
            }
        }
    }

    /// A hard link is the same inode with two names; a symbolic link holds its target as written, which readLink
    /// returns unresolved and realPath resolves.
    func testLinksReadLinkAndRealPath() throws {
        let file = try makeFile("target")
        let hard = path("hard")
        let soft = path("soft")
        try FileManager.default.createDirectory(atPath: path("sub"), withIntermediateDirectories: false)
        try checked { harness in
            try completes(harness, Files.link(at: hard, pointingTo: file))
            XCTAssertEqual(try systemStat(hard).st_ino, try systemStat(file).st_ino)
            XCTAssertEqual(try XCTUnwrap(try completes(harness, Files.stat(file)).first).linkCount, 2)
            let exists = try failure(harness, Files.link(at: hard, pointingTo: file))
            XCTAssertEqual(exists.name, "EEXIST")
            XCTAssertEqual(exists.context, "link \(hard) -> \(file)")

            try completes(harness, Files.symbolicLink(at: soft, pointingTo: "sub/../target"))
            XCTAssertEqual(try systemStat(soft).st_mode & S_IFMT, S_IFLNK)
            XCTAssertEqual(try completes(harness, Files.readLink(soft)), ["sub/../target"])
            let real = try XCTUnwrap(try completes(harness, Files.realPath(soft)).first)
            XCTAssertEqual(real, URL(fileURLWithPath: file).resolvingSymlinksInPath().path)
            XCTAssertTrue(real.hasSuffix("/target") && !real.contains(".."), real)

            XCTAssertEqual(try failure(harness, Files.readLink(file)).name, "EINVAL", "not a link")
            XCTAssertEqual(try failure(harness, Files.realPath(path("missing"))).name, "ENOENT")
            XCTAssertEqual(try failure(harness, Files.symbolicLink(at: soft, pointingTo: "x")).name, "EEXIST")
        }
    }

    /// A link whose target is not UTF-8 (the byte 0xE9), and a path that resolves into a directory of
    /// that name: `readLink` and `realPath` fail with `EILSEQ` naming the call, instead of answering
    /// with U+FFFD in a path that names nothing.
    func testReadLinkAndRealPathOfAnAnswerThatIsNotUTF8AreEILSEQ() throws {
        var latin1 = Array((directory + "/").utf8CString.dropLast()) + [CChar(bitPattern: 0xe9), 0]
        XCTAssertEqual(mkdir(&latin1, 0o755), 0)
        let link = path("to-latin1")
        XCTAssertEqual(symlink([CChar(bitPattern: 0xe9), 0], link), 0)
        try checked { harness in
            let target = try failure(harness, Files.readLink(link))
            XCTAssertEqual(target.name, "EILSEQ")
            XCTAssertEqual(target.context, "readlink \(link)")
            XCTAssertTrue(target.message.contains("not valid UTF-8"), target.description)
            let resolved = try failure(harness, Files.realPath(link))
            XCTAssertEqual(resolved.name, "EILSEQ")
            XCTAssertEqual(resolved.context, "realpath \(link)")
        }
    }

    /// The async forms run the same signals: values come back, errors are thrown as the same `UVError`s.
    func testAsyncFormsReturnAndThrowWhatTheSignalsSend() async throws {
        let base = directory
        let file = base + "/async-file"
        try Data([1, 2, 3, 4]).write(to: URL(fileURLWithPath: file))
        let info = try await FileSystem.stat(file)
        XCTAssertEqual(info.size, 4)
        XCTAssertEqual(info.inode, UInt64(try systemStat(file).st_ino))
        let exists = try await FileSystem.exists(base + "/nothing")
        XCTAssertFalse(exists)
        try await FileSystem.createDirectory(base + "/x/y", withParents: true)
        try await FileSystem.copy(from: file, to: base + "/x/y/copy")
        try await FileSystem.symbolicLink(at: base + "/x/link", pointingTo: "y")
        let link = try await FileSystem.readLink(base + "/x/link")
        XCTAssertEqual(link, "y")
        var names: [String] = []
        for try await entry in FileSystem.list(base + "/x") { names.append("\(entry.name):\(entry.type)") }
        XCTAssertEqual(names.sorted(), ["link:symbolic link", "y:directory"])
        do {
            try await FileSystem.removeDirectory(base + "/x")
            XCTFail("a directory with entries was removed")
        } catch let error as UVError {
            XCTAssertEqual(error.name, "ENOTEMPTY")
            XCTAssertEqual(error.context, "rmdir \(base)/x")
        }
        try await FileSystem.removeTree(base + "/x")
        let gone = try await FileSystem.exists(base + "/x")
        XCTAssertFalse(gone)
        let temporary = try await FileSystem.makeTemporaryDirectory(prefix: base + "/tmp-")
        XCTAssertTrue(temporary.hasPrefix(base + "/tmp-"))
    }

    /// A request still pending when its loop shuts down ends with `EventLoopError.shutDown`, and the harness finds
    /// no request left behind (the loop closes with 0).
    func testALoopShutdownEndsPendingRequestsWithShutDown() throws {
        let listed = path("shut")
        try FileManager.default.createDirectory(atPath: listed, withIntermediateDirectories: false)
        for index in 0..<50 { XCTAssertTrue(FileManager.default.createFile(atPath: listed + "/f\(index)", contents: nil)) }
        let loop = EventLoop(name: "fs-shutdown")
        let ended = Locked<[String]>([])
        let paused = Locked<Subscription?>(nil)
        let sawEntry = Locked(false)
        loop.execute {
            for index in 0..<20 {
                _ = Files.stat(listed + "/f\(index)").subscribe(error: { error in ended.withLock { $0.append("\(error)") } },
                                                                 completed: { ended.withLock { $0.append("completed") } })
            }
            // A listing paused after its first value has no request pending: the shutdown must still end it.
            let subscription = Files.list(listed, batchSize: 5, on: nil, afterEachBatch: nil).subscribe(
                next: { _ in
                    paused.current?.flowControl?.pause()
                    sawEntry.withLock { $0 = true }
                },
                error: { error in ended.withLock { $0.append("list: \(error)") } },
                completed: { ended.withLock { $0.append("list completed") } })
            paused.withLock { $0 = subscription as? Subscription }
        }
        waitUntil("the listing's first entry") { sawEntry.current }
        loop.shutdown()
        let outcomes = ended.current
        XCTAssertEqual(outcomes.count, 21, "\(outcomes)")
        XCTAssertTrue(outcomes.allSatisfy { $0 == "completed" || $0.contains("shut") }, "\(outcomes)")
        XCTAssertTrue(outcomes.contains { $0.hasPrefix("list: ") && $0.contains("shut") }, "\(outcomes)")
    }
}

import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `Files.stat`, `lstat`, `access`, `exists`, the attribute setters and the checks at the door.
final class FileMetadataTests: FileSystemTestCase {
    /// stat agrees field by field with what Glibc's stat sees; lstat describes a link itself, stat its target.
    func testStatAndLstatSayWhatTheSystemSays() throws {
        let file = try makeFile("data", Array(repeating: 7, count: 12_345))
        let link = path("link")
        XCTAssertEqual(symlink(file, link), 0)
        let expected = try systemStat(file)
        try checked { harness in
            let info = try XCTUnwrap(try completes(harness, Files.stat(file)).first)
            XCTAssertEqual(info.type, .regular)
            XCTAssertEqual(info.size, 12_345)
            XCTAssertEqual(info.inode, UInt64(expected.st_ino))
            XCTAssertEqual(info.device, UInt64(expected.st_dev))
            XCTAssertEqual(info.permissions, UInt32(expected.st_mode) & 0o7777)
            XCTAssertEqual(info.userID, expected.st_uid)
            XCTAssertEqual(info.linkCount, UInt64(expected.st_nlink))
            XCTAssertEqual(info.modificationTime, .seconds(expected.st_mtim.tv_sec) + .nanoseconds(expected.st_mtim.tv_nsec))

            let followed = try XCTUnwrap(try completes(harness, Files.stat(link)).first)
            XCTAssertEqual(followed.inode, info.inode, "stat follows the link")
            let linkInfo = try XCTUnwrap(try completes(harness, Files.lstat(link)).first)
            XCTAssertEqual(linkInfo.type, .symbolicLink)
            XCTAssertEqual(linkInfo.inode, UInt64(try systemStat(link).st_ino))
            XCTAssertNotEqual(linkInfo.inode, info.inode)
            XCTAssertEqual(linkInfo.size, UInt64(file.utf8.count), "a link's size is its target's length")

            let dir = try XCTUnwrap(try completes(harness, Files.stat(directory)).first)
            XCTAssertEqual(dir.type, .directory)

            let missing = try failure(harness, Files.stat(path("missing")))
            XCTAssertEqual(missing.name, "ENOENT")
            XCTAssertEqual(missing.context, "stat \(path("missing"))", "the error names the path")
        }
    }

    /// exists: true, false for ENOENT (and a dangling link); any other error is an error (ENOTDIR under a file).
    func testExistsIsFalseOnlyForENOENT() throws {
        let file = try makeFile("here")
        XCTAssertEqual(symlink(path("nowhere"), path("dangling")), 0)
        try checked { harness in
            XCTAssertEqual(try completes(harness, Files.exists(file)), [true])
            XCTAssertEqual(try completes(harness, Files.exists(directory)), [true])
            XCTAssertEqual(try completes(harness, Files.exists(path("missing"))), [false])
            XCTAssertEqual(try completes(harness, Files.exists(path("dangling"))), [false])
            XCTAssertEqual(try failure(harness, Files.exists(file + "/below")).name, "ENOTDIR")
        }
    }

    /// access checks each permission for the caller's real IDs (as access(2): so root, even with its effective
    /// IDs dropped, may read and write anything, but executes only what has an execute bit).
    func testAccessChecksEachPermission() throws {
        let file = try makeFile("readonly")
        XCTAssertEqual(Foundation.chmod(file, 0o444), 0)
        try checked { harness in
            try completes(harness, Files.access(file, .read))
            try completes(harness, Files.access(file, .exists))
            let execute = try failure(harness, Files.access(file, [.read, .execute]))
            XCTAssertEqual(execute.name, "EACCES")
            XCTAssertEqual(execute.context, "access \(file)")
            if getuid() == 0 {
                try completes(harness, Files.access(file, .write))
            } else {
                XCTAssertEqual(try failure(harness, Files.access(file, .write)).name, "EACCES")
            }
            XCTAssertEqual(try failure(harness, Files.access(path("missing"), .exists)).name, "ENOENT")
            XCTAssertEqual(try failure(harness, Files.access(file, FileAccess(rawValue: 8))).name, "EINVAL")
        }
    }

    /// Times set with nanoseconds read back exactly (uv_fs_utime would keep microseconds); setLinkTimes sets the
    /// link's own times and leaves its target's.
    func testTimesRoundTripToTheNanosecond() throws {
        let file = try makeFile("timed")
        let link = path("timed-link")
        XCTAssertEqual(symlink(file, link), 0)
        let access: Duration = .seconds(1_700_000_000) + .nanoseconds(123_456_789)
        let modification: Duration = .seconds(1_600_000_000) + .nanoseconds(987_654_321)
        try checked { harness in
            try completes(harness, Files.setTimes(file, access: access, modification: modification))
            let info = try XCTUnwrap(try completes(harness, Files.stat(file)).first)
            XCTAssertEqual(info.accessTime, access)
            XCTAssertEqual(info.modificationTime, modification)
            let system = try systemStat(file)
            XCTAssertEqual(system.st_mtim.tv_nsec, 987_654_321)

            let before1970: Duration = .seconds(-10) + .nanoseconds(250_000_000)  // -9.75 s
            try completes(harness, Files.setLinkTimes(link, access: before1970, modification: before1970))
            let linkInfo = try XCTUnwrap(try completes(harness, Files.lstat(link)).first)
            XCTAssertEqual(linkInfo.modificationTime, before1970)
            XCTAssertEqual(try systemStat(link).st_mtim.tv_sec, -10)
            XCTAssertEqual(try systemStat(link).st_mtim.tv_nsec, 250_000_000)
            // Written with one sign (it was "mtime -9.-750000000": both components of a negative duration are negative).
            XCTAssertTrue(linkInfo.status.description.hasSuffix("mtime -9.750000000"), linkInfo.status.description)
            XCTAssertTrue(info.status.description.hasSuffix("mtime 1600000000.987654321"), info.status.description)
            XCTAssertEqual(try XCTUnwrap(try completes(harness, Files.stat(file)).first).modificationTime, modification,
                           "the target keeps its times")

            let missing = try failure(harness, Files.setTimes(path("missing"), access: access, modification: access))
            XCTAssertEqual(missing.name, "ENOENT")
            XCTAssertEqual(missing.context, "utimensat \(path("missing"))")
        }
    }

    /// A `Duration` can hold times no `timespec` can (seconds beyond `Int64`): such a time to `setTimes` or
    /// `setLinkTimes` is `EINVAL` naming it, before any call, and the file keeps its times. Both used to trap
    /// and take the process down (in `Duration.components`, or in the step down from `Int64.min` seconds for
    /// a time just before it). The extremes a `timespec` holds are still passed on (the kernel clamps them
    /// to what the file system stores).
    func testTimesBeyondWhatATimespecHoldsAreEINVAL() throws {
        let file = try makeFile("far")
        let kept: Duration = .seconds(1_600_000_000)
        try checked { harness in
            try completes(harness, Files.setTimes(file, access: kept, modification: kept))
            let beyond: [(Duration, Duration, String)] = [
                (.seconds(Int64.max) * 4, .zero, "access"),
                (.zero, .seconds(Int64.min) - .nanoseconds(1), "modification"),
                (.seconds(Int64.max) + .seconds(1), .zero, "access"),
            ]
            for (access, modification, which) in beyond {
                for signal in [Files.setTimes(file, access: access, modification: modification),
                               Files.setLinkTimes(file, access: access, modification: modification)] {
                    let error = try failure(harness, signal)
                    XCTAssertEqual(error.name, "EINVAL")
                    XCTAssertTrue(error.message.hasPrefix("the \(which) time "), error.description)
                    XCTAssertTrue(error.message.contains("outside what a timespec holds"), error.description)
                    XCTAssertEqual(error.context, "utimensat \(file)")
                }
            }
            XCTAssertEqual(try XCTUnwrap(try completes(harness, Files.stat(file)).first).modificationTime, kept)
            try completes(harness, Files.setTimes(file, access: .seconds(Int64.min), modification: .seconds(Int64.max) + .nanoseconds(999_999_999)))
        }
    }

    /// chmod sets the bits stat reads; a mode beyond 0o7777 is EINVAL before any request.
    func testChmodSetsTheModeAndRefusesBitsBeyond7777() throws {
        let file = try makeFile("mode")
        try checked { harness in
            try completes(harness, Files.chmod(file, 0o4751))
            XCTAssertEqual(UInt32(try systemStat(file).st_mode) & 0o7777, 0o4751)
            let tooBig = try failure(harness, Files.chmod(file, 0o100644))
            XCTAssertEqual(tooBig.name, "EINVAL")
            XCTAssertTrue(tooBig.message.contains("0o100644"), tooBig.description)
            XCTAssertEqual(UInt32(try systemStat(file).st_mode) & 0o7777, 0o4751, "nothing changed")
        }
    }

    /// chown and lchown as root: the owner and group change to `nobody`'s, as stat reads them; a nil group is
    /// left as it was, and lchown changes the link, not its target. Then, as a user (run as root: `nobody`,
    /// given a supplementary group), what a user may and may not change.
    func testChownAndLchownChangeTheOwner() throws {
        if geteuid() == 0 {
            let file = try makeFile("owned")
            let link = path("owned-link")
            XCTAssertEqual(symlink(file, link), 0)
            let nobody: UInt32 = 65534
            try checked { harness in
                try completes(harness, Files.lchown(link, user: nobody, group: nobody))
                XCTAssertEqual(try systemStat(link).st_uid, nobody)
                XCTAssertEqual(try systemStat(link).st_gid, nobody)
                XCTAssertEqual(try systemStat(file).st_uid, 0, "lchown leaves the link's target alone")
                try completes(harness, Files.chown(file, group: nobody))
                XCTAssertEqual(try systemStat(file).st_gid, nobody)
                XCTAssertEqual(try systemStat(file).st_uid, 0, "a nil user is left as it was")
                try completes(harness, Files.chown(file, user: nobody))
                XCTAssertEqual(try systemStat(file).st_uid, nobody)
                XCTAssertEqual(try systemStat(file).st_gid, nobody, "a nil group is left as it was")
                XCTAssertEqual(try failure(harness, Files.chown(path("missing"), user: nobody)).name, "ENOENT")
            }
        }
        try assertWhatAUserMayChown()
    }

    /// As a user (as root: `nobody`, with one supplementary group): giving a file or a link away, or a file to a
    /// group the user is not in, is `EPERM` naming the path, and changes nothing; a link's group (lchown) and a
    /// file's (chown) can be changed to another of the user's own groups, where the user has one; a file the
    /// user does not own (root's) cannot be changed at all.
    private func assertWhatAUserMayChown() throws {
        let isRoot = geteuid() == 0
        let rootsFile = isRoot ? try makeFile("roots") : nil
        let groupsBefore = try supplementaryGroupsOfThisProcess()
        if isRoot { XCTAssertEqual(Foundation.chmod(directory, 0o777), 0, "nobody makes its files here") }
        // Any group ID will do: root may give `nobody` a group that /etc/group does not list.
        try withoutRootPrivileges(supplementaryGroups: [4242]) {
            let mine = try makeFile("users")
            let link = path("users-link")
            XCTAssertEqual(symlink(mine, link), 0)
            let user = geteuid()
            let before = try systemStat(mine)
            XCTAssertEqual(before.st_uid, user)
            let groups = Set(try supplementaryGroupsOfThisProcess() + [getegid()])
            let anotherUser: UInt32 = 0  // root: never this user
            let notMyGroup = try XCTUnwrap((UInt32(0)...).first { !groups.contains($0) })
            let anotherOfMyGroups = groups.sorted().first { $0 != before.st_gid }
            if isRoot { XCTAssertEqual(anotherOfMyGroups, 4242, "nobody was given the group") }
            try checked { harness in
                let givenAway = try failure(harness, Files.chown(mine, user: anotherUser))
                XCTAssertEqual(givenAway.name, "EPERM")
                XCTAssertEqual(givenAway.context, "chown \(mine)")
                let linkGivenAway = try failure(harness, Files.lchown(link, user: anotherUser))
                XCTAssertEqual(linkGivenAway.name, "EPERM")
                XCTAssertEqual(linkGivenAway.context, "lchown \(link)")
                let foreignGroup = try failure(harness, Files.chown(mine, group: notMyGroup))
                XCTAssertEqual(foreignGroup.name, "EPERM")
                XCTAssertEqual(foreignGroup.context, "chown \(mine)")
                XCTAssertEqual(try systemStat(mine).st_uid, user, "nothing changed")
                XCTAssertEqual(try systemStat(mine).st_gid, before.st_gid, "nothing changed")

                // A user in one group only has no other group to give a file: nothing to see there.
                if let other = anotherOfMyGroups {
                    try completes(harness, Files.lchown(link, user: user, group: other))
                    XCTAssertEqual(try systemStat(link).st_gid, other)
                    XCTAssertEqual(try systemStat(mine).st_gid, before.st_gid, "lchown leaves the link's target alone")
                    try completes(harness, Files.chown(mine, group: other))
                    XCTAssertEqual(try systemStat(mine).st_gid, other)
                    XCTAssertEqual(try systemStat(mine).st_uid, user, "a nil user is left as it was")
                }
                if let rootsFile {
                    let notMine = try failure(harness, Files.chown(rootsFile, group: getegid()))
                    XCTAssertEqual(notMine.name, "EPERM")
                    XCTAssertEqual(notMine.context, "chown \(rootsFile)")
                    XCTAssertEqual(try systemStat(rootsFile).st_gid, 0)
                }
            }
        }
        XCTAssertEqual(try supplementaryGroupsOfThisProcess(), groupsBefore, "the process's own groups are back")
    }

    /// truncate cuts and extends (zeros); a negative size is EINVAL before any request; no descriptor stays open.
    func testTruncateCutsAndExtends() throws {
        let file = try makeFile("sized", Array(1...100))
        try checked { harness in
            try completes(harness, Files.truncate(file, to: 10))
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), Data(Array(1...10)))
            try completes(harness, Files.truncate(file, to: 20))
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), Data(Array(1...10) + Array(repeating: 0, count: 10)))
            let negative = try failure(harness, Files.truncate(file, to: -1))
            XCTAssertEqual(negative.name, "EINVAL")
            XCTAssertTrue(negative.message.contains("-1"), negative.description)
            XCTAssertEqual(try failure(harness, Files.truncate(path("missing"), to: 0)).context, "open \(path("missing"))")
            XCTAssertEqual(try failure(harness, Files.truncate(directory, to: 0)).name, "EISDIR")
            XCTAssertEqual(try descriptors(openOn: file), 0)
        }
        XCTAssertEqual(try systemStat(file).st_size, 20)
    }

    /// A path with a NUL byte is EINVAL with a message, an empty path ENOENT, before any request: nothing is made
    /// at the part before the NUL (libuv takes C strings and would have acted on it).
    func testEmptyPathsAndNULBytesAreRefusedAtTheDoor() throws {
        let cut = path("cut")
        try checked { harness in
            let nul = try failure(harness, Files.createDirectory(cut + "\0tail"))
            XCTAssertEqual(nul.name, "EINVAL")
            XCTAssertTrue(nul.message.contains("NUL"), nul.description)
            XCTAssertTrue(nul.context.contains("\\0tail"), nul.description)
            XCTAssertFalse(FileManager.default.fileExists(atPath: cut), "nothing was created at the part before the NUL")

            let empty = try failure(harness, Files.stat(""))
            XCTAssertEqual(empty.name, "ENOENT")
            XCTAssertEqual(empty.message, "the path is empty")

            let file = try makeFile("source")
            let destination = try failure(harness, Files.rename(from: file, to: cut + "\0"))
            XCTAssertTrue(destination.message.contains("destination"), destination.description)
            XCTAssertTrue(FileManager.default.fileExists(atPath: file), "the source was not moved")
            XCTAssertEqual(try failure(harness, Files.symbolicLink(at: cut, pointingTo: "")).message, "the target is empty")
            XCTAssertEqual(try failure(harness, Files.makeTemporaryDirectory(prefix: "a\0b")).name, "EINVAL")
            XCTAssertEqual(try failure(harness, Files.list("\0")).name, "EINVAL")
            XCTAssertEqual(try failure(harness, Files.setTimes("", access: .zero, modification: .zero)).name, "ENOENT")
        }
    }

    /// An empty path is `ENOENT`, as `stat(2)` answers it (POSIX: no file has the empty name), in every path call,
    /// with a message naming the empty argument and a context naming the call; `exists` says `false`, as for any
    /// `ENOENT`. Before, each was `EINVAL`, which reads as a bad argument of another kind.
    func testAnEmptyPathIsENOENTAsStatSaysInEveryCall() async throws {
        var status = Glibc.stat()
        XCTAssertEqual(fstatat(AT_FDCWD, "", &status, 0), -1)
        XCTAssertEqual(errno, ENOENT, "the kernel's answer this matches")
        let file = try makeFile("file")
        let calls: [(String, Signal<Void>)] = [
            ("stat", Files.stat("").map { _ in () }), ("lstat", Files.lstat("").map { _ in () }),
            ("access", Files.access("", .read)), ("chmod", Files.chmod("", 0o644)), ("chown", Files.chown("", user: 0)),
            ("lchown", Files.lchown("", user: 0)), ("utimensat", Files.setTimes("", access: .zero, modification: .zero)),
            ("utimensat", Files.setLinkTimes("", access: .zero, modification: .zero)), ("truncate", Files.truncate("", to: 0)),
            ("mkdir", Files.createDirectory("")), ("mkdir", Files.createDirectory("", withParents: true)),
            ("rmdir", Files.removeDirectory("")), ("unlink", Files.remove("")), ("removeTree", Files.removeTree("")),
            ("opendir", Files.list("").map { _ in () }), ("rename", Files.rename(from: "", to: file)),
            ("rename", Files.rename(from: file, to: "")), ("copyfile", Files.copy(from: "", to: path("copy"))),
            ("copyfile", Files.copy(from: file, to: "")), ("link", Files.link(at: "", pointingTo: file)),
            ("link", Files.link(at: path("hard"), pointingTo: "")), ("symlink", Files.symbolicLink(at: "", pointingTo: file)),
            ("symlink", Files.symbolicLink(at: path("soft"), pointingTo: "")), ("readlink", Files.readLink("").map { _ in () }),
            ("realpath", Files.realPath("").map { _ in () }), ("open", Files.open("").map { _ in () }),
            ("mkstemp", Files.makeTemporaryFile(in: "").map { _ in () }), ("Files.read", Files.read("").map { _ in () }),
            ("Files.chunks", Files.chunks("").map { _ in () }), ("Files.write", Files.write([1], to: "")),
            ("FileWatch.changes", FileWatch.changes(at: "").map { _ in () }),
            ("FileWatch.poll", FileWatch.poll(at: "").map { _ in () }),
        ]
        try checked { harness in
            for (call, signal) in calls {
                let error = try failure(harness, signal)
                XCTAssertEqual(error.name, "ENOENT", "\(call): \(error)")
                XCTAssertTrue(error.message.hasPrefix("the ") && error.message.hasSuffix(" is empty"), "\(call): \(error)")
                XCTAssertTrue(error.context.hasPrefix(call), "\(call): \(error)")
            }
            XCTAssertEqual(try completes(harness, Files.exists("")), [false])
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["file"], "nothing was made")
        await withCheckedHarness { harness in
            let thrown = try await thrownError { try await FileSystem.stat("", on: harness.loop) }
            XCTAssertEqual(thrown.name, "ENOENT")
        }
    }
}

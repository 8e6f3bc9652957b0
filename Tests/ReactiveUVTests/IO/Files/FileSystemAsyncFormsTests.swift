import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// The `async throws` forms on `FileSystem` of `Files`' whole-file calls (`read`, `chunks`, `write`) and of the
/// metadata, name and attribute calls no other test awaited: each has its effect, returns what its signal
/// sends, and throws the `UVError` its signal fails with (naming the path).
final class FileSystemAsyncFormsTests: FileSystemTestCase {
    func testAsyncWholeFileWriteReadAndChunks() async throws {
        let name = path("whole.bin")
        let bytes = bytePattern(250_000, seed: 31)
        await withCheckedHarness { harness in
            let loop = harness.loop
            try await FileSystem.write(Array(bytes[..<100]), to: name, on: loop)
            XCTAssertEqual(try self.contents(name), Array(bytes[..<100]))
            try await FileSystem.write(Array(bytes[100...]), to: name, append: true, on: loop)
            XCTAssertTrue(try self.contents(name) == bytes, "appended")
            let read = try await FileSystem.read(name, on: loop)
            XCTAssertTrue(read == bytes)
            XCTAssertTrue(try self.completes(harness, Files.read(name)) == [read], "as the signal sends it")
            try await FileSystem.write([1, 2], to: name, on: loop)
            XCTAssertEqual(try self.contents(name), [1, 2], "replaced")

            try await FileSystem.write(bytes, to: name, on: loop)
            var chunks: [[UInt8]] = []
            for try await chunk in FileSystem.chunks(name, chunkSize: 100_000, on: loop) { chunks.append(chunk) }
            XCTAssertEqual(chunks.map(\.count), [100_000, 100_000, 50_000])
            XCTAssertTrue(chunks.flatMap { $0 } == bytes, "in order")
            XCTAssertTrue(try self.completes(harness, Files.chunks(name, chunkSize: 100_000)) == chunks, "as the signal sends them")

            let missing = self.path("missing")
            try await self.assertThrowsTheSignalsError(harness, Files.read(missing), { try await FileSystem.read(missing, on: loop) },
                                                       named: "ENOENT", path: missing)
            try await self.assertThrowsTheSignalsError(harness, Files.read(name, maxSize: 10), { try await FileSystem.read(name, maxSize: 10, on: loop) },
                                                       named: "EFBIG", path: name)
            let below = missing + "/file"
            try await self.assertThrowsTheSignalsError(harness, Files.write([1], to: below), { try await FileSystem.write([1], to: below, on: loop) },
                                                       named: "ENOENT", path: below)
            try await self.assertThrowsTheSignalsError(harness, Files.chunks(missing), {
                for try await _ in FileSystem.chunks(missing, on: loop) { XCTFail("a chunk of a missing file") }
            }, named: "ENOENT", path: missing)
        }
    }

    /// `lstat`, `access`, `remove`, `rename`, `link` and `realPath`: each has its effect and throws its signal's error.
    func testAsyncNameAndMetadataFormsHaveTheirEffectsAndThrowTheirSignalsErrors() async throws {
        let file = try makeFile("file", [1, 2, 3])
        let soft = path("soft")
        XCTAssertEqual(symlink("file", soft), 0)
        let missing = path("missing")
        await withCheckedHarness { harness in
            let loop = harness.loop
            let linkInfo = try await FileSystem.lstat(soft, on: loop)
            XCTAssertEqual(linkInfo.type, .symbolicLink, "the link itself, not its target")
            XCTAssertEqual(linkInfo.inode, UInt64(try self.systemStat(soft).st_ino))
            XCTAssertEqual(try self.completes(harness, Files.lstat(soft)).map(\.inode), [linkInfo.inode])
            try await self.assertThrowsTheSignalsError(harness, Files.lstat(missing), { try await FileSystem.lstat(missing, on: loop) },
                                                       named: "ENOENT", path: missing)

            try await FileSystem.access(file, [.read, .write], on: loop)
            // No execute bit is set: refused even to root.
            try await self.assertThrowsTheSignalsError(harness, Files.access(file, .execute), { try await FileSystem.access(file, .execute, on: loop) },
                                                       named: "EACCES", path: file)
            try await self.assertThrowsTheSignalsError(harness, Files.access(missing, .exists), { try await FileSystem.access(missing, .exists, on: loop) },
                                                       named: "ENOENT", path: missing)

            let hard = self.path("hard")
            try await FileSystem.link(at: hard, pointingTo: file, on: loop)
            XCTAssertEqual(try self.systemStat(hard).st_ino, try self.systemStat(file).st_ino, "one inode, two names")
            try await self.assertThrowsTheSignalsError(harness, Files.link(at: hard, pointingTo: file),
                                                       { try await FileSystem.link(at: hard, pointingTo: file, on: loop) }, named: "EEXIST", path: hard)

            let real = try await FileSystem.realPath(soft, on: loop)
            XCTAssertEqual(real, URL(fileURLWithPath: file).resolvingSymlinksInPath().path)
            XCTAssertEqual(try self.completes(harness, Files.realPath(soft)), [real])
            try await self.assertThrowsTheSignalsError(harness, Files.realPath(missing), { try await FileSystem.realPath(missing, on: loop) },
                                                       named: "ENOENT", path: missing)

            let renamed = self.path("renamed")
            let inode = try self.systemStat(hard).st_ino
            try await FileSystem.rename(from: hard, to: renamed, on: loop)
            XCTAssertThrowsError(try self.systemStat(hard), "the old name is gone")
            XCTAssertEqual(try self.systemStat(renamed).st_ino, inode, "the same file under the new name")
            let notThere = try await self.assertThrowsTheSignalsError(harness, Files.rename(from: hard, to: renamed),
                                                                      { try await FileSystem.rename(from: hard, to: renamed, on: loop) },
                                                                      named: "ENOENT", path: hard)
            XCTAssertEqual(notThere.context, "rename \(hard) -> \(renamed)")

            try await FileSystem.remove(renamed, on: loop)
            XCTAssertThrowsError(try self.systemStat(renamed), "removed")
            XCTAssertEqual(try self.systemStat(file).st_nlink, 1, "the other name stays")
            try await self.assertThrowsTheSignalsError(harness, Files.remove(renamed), { try await FileSystem.remove(renamed, on: loop) },
                                                       named: "ENOENT", path: renamed)
        }
    }

    /// `chmod`, `chown`, `lchown`, `setTimes`, `setLinkTimes` and `truncate`: each has its effect and throws its
    /// signal's error. As root the owners change to `nobody` (65534); as anyone else to the caller's own ids.
    func testAsyncAttributeFormsHaveTheirEffectsAndThrowTheirSignalsErrors() async throws {
        let file = try makeFile("file", [1, 2, 3, 4, 5])
        let soft = path("soft")
        XCTAssertEqual(symlink("file", soft), 0)
        let missing = path("missing")
        let (user, group): (UInt32, UInt32) = geteuid() == 0 ? (65534, 65534) : (geteuid(), getegid())
        await withCheckedHarness { harness in
            let loop = harness.loop
            try await FileSystem.chmod(file, 0o640, on: loop)
            XCTAssertEqual(UInt32(try self.systemStat(file).st_mode) & 0o7777, 0o640)
            try await self.assertThrowsTheSignalsError(harness, Files.chmod(missing, 0o600), { try await FileSystem.chmod(missing, 0o600, on: loop) },
                                                       named: "ENOENT", path: missing)

            try await FileSystem.chown(file, user: user, on: loop)
            XCTAssertEqual(try self.systemStat(file).st_uid, user)
            try await FileSystem.chown(file, group: group, on: loop)
            XCTAssertEqual(try self.systemStat(file).st_gid, group)
            XCTAssertEqual(try self.systemStat(file).st_uid, user, "a nil user is left as it was")
            try await self.assertThrowsTheSignalsError(harness, Files.chown(missing, user: user), { try await FileSystem.chown(missing, user: user, on: loop) },
                                                       named: "ENOENT", path: missing)

            if geteuid() == 0 { try await FileSystem.chown(file, user: 0, group: 0, on: loop) }
            try await FileSystem.lchown(soft, user: user, group: group, on: loop)
            XCTAssertEqual(try self.systemStat(soft).st_uid, user, "the link itself")
            XCTAssertEqual(try self.systemStat(soft).st_gid, group)
            XCTAssertEqual(try self.systemStat(file).st_uid, geteuid() == 0 ? 0 : user, "not its target")
            try await self.assertThrowsTheSignalsError(harness, Files.lchown(missing, user: user), { try await FileSystem.lchown(missing, user: user, on: loop) },
                                                       named: "ENOENT", path: missing)

            let access = Duration.seconds(1_000_000_000) + .nanoseconds(123_456_789)
            let modification = Duration.seconds(1_100_000_000) + .nanoseconds(987_654_321)
            let linkTimesBefore = try self.systemStat(soft).st_mtim
            try await FileSystem.setTimes(file, access: access, modification: modification, on: loop)
            let times = try self.systemStat(file)
            XCTAssertEqual([times.st_atim.tv_sec, times.st_atim.tv_nsec], [1_000_000_000, 123_456_789], "to the nanosecond")
            XCTAssertEqual([times.st_mtim.tv_sec, times.st_mtim.tv_nsec], [1_100_000_000, 987_654_321])
            XCTAssertEqual(try self.systemStat(soft).st_mtim.tv_sec, linkTimesBefore.tv_sec, "the link's own times did not change")
            try await self.assertThrowsTheSignalsError(harness, Files.setTimes(missing, access: access, modification: modification),
                                                       { try await FileSystem.setTimes(missing, access: access, modification: modification, on: loop) },
                                                       named: "ENOENT", path: missing)

            try await FileSystem.setLinkTimes(soft, access: modification, modification: access, on: loop)
            let linkTimes = try self.systemStat(soft)
            XCTAssertEqual([linkTimes.st_mtim.tv_sec, linkTimes.st_mtim.tv_nsec], [1_000_000_000, 123_456_789], "the link itself")
            XCTAssertEqual(try self.systemStat(file).st_mtim.tv_sec, 1_100_000_000, "not its target")
            try await self.assertThrowsTheSignalsError(harness, Files.setLinkTimes(missing, access: access, modification: modification),
                                                       { try await FileSystem.setLinkTimes(missing, access: access, modification: modification, on: loop) },
                                                       named: "ENOENT", path: missing)

            try await FileSystem.truncate(file, to: 2, on: loop)
            XCTAssertEqual(try self.contents(file), [1, 2])
            try await FileSystem.truncate(file, to: 4, on: loop)
            XCTAssertEqual(try self.contents(file), [1, 2, 0, 0], "extended with zeros")
            try await self.assertThrowsTheSignalsError(harness, Files.truncate(missing, to: 0), { try await FileSystem.truncate(missing, to: 0, on: loop) },
                                                       named: "ENOENT", path: missing)
        }
    }
}

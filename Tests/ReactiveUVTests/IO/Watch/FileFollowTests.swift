import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `FileWatch.followEvents` and `FileWatch.follow` across what happens to a followed log: appends, a
/// rotation by rename, `copytruncate`, a delete and re-create, its directory removed and made again.
///
/// Each test asserts the whole log of events in order (adjacent byte chunks joined, so a read's size
/// does not matter). A change made inside `harness.onLoop` lands while the loop is held, so the
/// follower sees all of it in one pass.
final class FileFollowTests: FollowTestCase {
    /// Appends are sent in order, each byte once, from the end the file had at the start.
    func testAppendsAreSentInOrderFromTheEnd() throws {
        try write("before\n")
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: path))
            try waitForLog(follow, ["following"])
            for number in 1...5 {
                try append("line \(number)\n")
                try waitForLog(follow, ["following", (1...number).map { "line \($0)\n" }.joined()])
            }
            XCTAssertNil(follow.terminal)
        }
    }

    /// A rotation (renamed away, a new file made): what the old file got before the switch, then the new
    /// file from its start, announced by `.following` after the old file's last bytes.
    func testARotationReadsTheOldFileToItsEndThenTheNewFile() throws {
        try write("")
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: path))
            try waitForLog(follow, ["following"])
            try append("1\n")
            try waitForLog(follow, ["following", "1\n"])
            try harness.onLoop {
                try self.append("2\n")
                XCTAssertEqual(rename(self.path, self.path + ".1"), 0)
                try self.append("3\n", to: self.path + ".1")
                try self.write("new\n")
            }
            try waitForLog(follow, ["following", "1\n2\n3\n", "following", "new\n"])
            try append("after\n")
            try waitForLog(follow, ["following", "1\n2\n3\n", "following", "new\nafter\n"])
        }
    }

    /// Bytes the old file gets after the pass read it and before the pass finds another file under the name
    /// (forced by a hook at that point) are read before the new file's first byte.
    func testBytesAppendedWhileTheNameIsCheckedAreReadBeforeTheNewFile() throws {
        try write("a\n")
        defer { FileFollowSession.beforeLookingAtNameForTesting.withLock { $0 = nil } }
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: path, from: .beginning))
            try waitForLog(follow, ["following", "a\n"])
            let rotated = path + ".1"
            try harness.onLoop {
                XCTAssertEqual(rename(self.path, rotated), 0)
                try self.write("new\n")
                let armed = Locked(true)
                FileFollowSession.beforeLookingAtNameForTesting.withLock {
                    $0 = { _ in
                        guard armed.withLock({ let was = $0; $0 = false; return was }) else { return }
                        try? Self.append("late\n", to: rotated)
                    }
                }
            }
            try waitForLog(follow, ["following", "a\nlate\n", "following", "new\n"])
        }
    }

    /// Renamed away with no new file yet (logrotate's `nocreate`): `.missing`, and the renamed file is read on
    /// (its writer appends until it reopens the name) until a new file takes the name.
    func testAFileRenamedAwayIsReadOnUntilANewFileTakesTheName() throws {
        try write("a\n")
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: path, from: .beginning))
            try waitForLog(follow, ["following", "a\n"])
            XCTAssertEqual(rename(path, path + ".1"), 0)
            try waitForLog(follow, ["following", "a\n", "missing"])
            try append("b\n", to: path + ".1")
            try waitForLog(follow, ["following", "a\n", "missing", "b\n"])
            try harness.onLoop {
                try self.append("c\n", to: self.path + ".1")
                try self.write("d\n")
            }
            try waitForLog(follow, ["following", "a\n", "missing", "b\nc\n", "following", "d\n"])
        }
    }

    /// `copytruncate`: the file cut to less than was read is read again from 0, after a `.truncated` notice.
    func testCopytruncateIsReadAgainFromTheStart() throws {
        try write("x1\nx2\n")
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: path, from: .beginning))
            try waitForLog(follow, ["following", "x1\nx2\n"])
            try harness.onLoop {
                XCTAssertEqual(truncate(self.path, 0), 0)
                try self.append("z\n")
            }
            try waitForLog(follow, ["following", "x1\nx2\n", "truncated", "z\n"])
            try append("y\n")
            try waitForLog(follow, ["following", "x1\nx2\n", "truncated", "z\ny\n"])
        }
    }

    /// Deleted: `.missing`, the old file closed (its space is freed); made again: followed from its start.
    func testADeletedFileIsLetGoAndFollowedAgainWhenMadeAgain() throws {
        try write("one\n")
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: path, from: .beginning))
            try waitForLog(follow, ["following", "one\n"])
            XCTAssertEqual(try descriptorsOpen(on: path), 1)
            XCTAssertEqual(unlink(path), 0)
            try waitForLog(follow, ["following", "one\n", "missing"])
            try waitUntilOrThrow("the deleted file to be closed") { try descriptorsOpen(on: path + " (deleted)") == 0 }
            try write("two\n")
            try waitForLog(follow, ["following", "one\n", "missing", "following", "two\n"])
        }
    }

    /// The directory removed while followed, then made again with the file: the follower waits, watches the new
    /// directory, and follows the new file; appends to it wake the follower through that watch.
    func testADirectoryRemovedAndMadeAgainIsWatchedAgain() throws {
        let logs = directory + "/logs"
        let file = logs + "/app.log"
        try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: false)
        try write("first\n", to: file)
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: file, from: .beginning, interval: .milliseconds(50)))
            try waitForLog(follow, ["following", "first\n"])
            try FileManager.default.removeItem(atPath: logs)
            try waitForLog(follow, ["following", "first\n", "missing"])
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: false)
            let inode = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: logs)[.systemFileNumber] as? UInt64)
            try harness.wait(for: "the new directory to be watched") { InotifyProbe.watchedInodesOfThisProcess().contains(inode) }
            try write("second\n", to: file)
            try waitForLog(follow, ["following", "first\n", "missing", "following", "second\n"])
            try append("third\n", to: file)
            try waitForLog(follow, ["following", "first\n", "missing", "following", "second\nthird\n"])
        }
    }

    /// The bytes-only signal through `lines()`: lines in order across a rotation, notices left out.
    func testTheBytesSignalGivesLinesAcrossARotation() throws {
        try write("a\n")
        try checked { harness in
            let lines = try harness.record(FileWatch.follow(at: path, from: .beginning).lines())
            try lines.waitForValues(1)
            try harness.onLoop {
                try self.append("b\n")
                XCTAssertEqual(rename(self.path, self.path + ".1"), 0)
                try self.write("c\n")
            }
            try lines.waitForValues(3)
            try append("d\n")
            try lines.waitForValues(4)
            XCTAssertEqual(lines.values.map { String(decoding: $0, as: UTF8.self) }, ["a", "b", "c", "d"])
            XCTAssertNil(lines.terminal)
        }
    }
}

/// A follower's events as short words, adjacent byte chunks joined into one string, a terminal event last.
enum FollowLog {
    static func of(_ events: [Event<FileFollow.Event>]) -> [String] {
        var log: [String] = []
        var bytes: [UInt8]?
        func flush() {
            if let pending = bytes { log.append(String(decoding: pending, as: UTF8.self)) }
            bytes = nil
        }
        for event in events {
            switch event {
            case .next(.bytes(let chunk)): bytes = (bytes ?? []) + chunk
            case .next(.notice(let notice)):
                flush()
                log.append(word(for: notice))
            case .error(let error):
                flush()
                log.append("error \((error as? UVError)?.name ?? "\(error)")")
            case .completed:
                flush()
                log.append("completed")
            }
        }
        flush()
        return log
    }

    static func word(for notice: FileFollow.Notice) -> String {
        switch notice {
        case .following: "following"
        case .missing: "missing"
        case .denied: "denied"
        case .notAFile(let type): "not a file: \(type)"
        case .truncated: "truncated"
        case .unwatchable: "unwatchable"
        }
    }
}

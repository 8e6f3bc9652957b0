import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `FileWatch.followEvents`: where it starts, a file missing at the start, what it refuses, and what a
/// dispose leaves behind (nothing).
final class FileFollowStartTests: FollowTestCase {
    /// `.beginning`, `.end`, `.offset(2)`, and an offset past the end (the file was truncated since: a
    /// `.truncated` notice, then from 0); each then gets the same append.
    func testEachStartPositionReadsFromItsPlace() throws {
        try write("abcdef")
        try checked { harness in
            let beginning = try harness.record(FileWatch.followEvents(at: path, from: .beginning))
            let end = try harness.record(FileWatch.followEvents(at: path, from: .end))
            let offset = try harness.record(FileWatch.followEvents(at: path, from: .offset(2)))
            let past = try harness.record(FileWatch.followEvents(at: path, from: .offset(100)))
            try waitForLog(beginning, ["following", "abcdef"])
            try waitForLog(end, ["following"])
            try waitForLog(offset, ["following", "cdef"])
            try waitForLog(past, ["following", "truncated", "abcdef"])
            try append("gh")
            try waitForLog(beginning, ["following", "abcdefgh"])
            try waitForLog(end, ["following", "gh"])
            try waitForLog(offset, ["following", "cdefgh"])
            try waitForLog(past, ["following", "truncated", "abcdefgh"])
        }
    }

    /// Missing at the start with `.wait` (the default): `.missing`, then the file made later is read from its
    /// start, whatever `start` said. With `.fail`: `ENOENT` naming the path.
    func testAFileMissingAtTheStartIsAwaitedOrAnError() throws {
        try checked { harness in
            let awaited = try harness.record(FileWatch.followEvents(at: path, from: .end))
            let refused = try harness.record(FileWatch.followEvents(at: path, ifMissing: .fail))
            try waitForLog(awaited, ["missing"])
            let error = try XCTUnwrap(try refused.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ENOENT")
            XCTAssertTrue(error.description.contains(path), error.description)
            try write("hello\n")
            try waitForLog(awaited, ["missing", "following", "hello\n"])
        }
    }

    /// A directory is refused with `EISDIR` naming the path, with either `ifMissing`, and nothing is left open.
    func testADirectoryIsRefusedWithEISDIRNamingThePath() throws {
        let before = InotifyProbe.watchesOfThisProcess()
        try checked { harness in
            for ifMissing in [FileFollow.IfMissing.wait, .fail] {
                let follow = try harness.record(FileWatch.followEvents(at: directory, ifMissing: ifMissing))
                let error = try XCTUnwrap(try follow.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EISDIR")
                XCTAssertTrue(error.context.contains(directory), error.description)
                XCTAssertEqual(follow.values, [])
            }
            try waitUntilOrThrow("the directory to be closed") { try descriptorsOpen(on: directory) == 0 }
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess(), before, "the watch ended with the refusal")
            XCTAssertEqual(try harness.onLoop { harness.loop.timers.liveCount }, 0, "the ticks ended with the refusal")
        }
    }

    /// A FIFO cannot be read at offsets: `EINVAL` naming what it is. Bad arguments are refused before anything
    /// is opened: a negative offset, a chunk size of 0 or over the limit, an interval of 0 (`EINVAL`), an
    /// empty path (`ENOENT`), a NUL byte (`EINVAL`).
    func testAFIFOAndBadArgumentsAreRefused() throws {
        let fifo = directory + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        try checked { harness in
            let notRegular = try harness.record(FileWatch.followEvents(at: fifo))
            let error = try XCTUnwrap(try notRegular.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EINVAL")
            XCTAssertTrue(error.message.contains("FIFO") || error.message.contains("fifo"), error.description)

            let refusals: [(Signal<FileFollow.Event>, String)] = [
                (FileWatch.followEvents(at: path, from: .offset(-1)), "EINVAL"),
                (FileWatch.followEvents(at: path, chunkSize: 0), "EINVAL"),
                (FileWatch.followEvents(at: path, chunkSize: OpenFile.maxReadCount + 1), "EINVAL"),
                (FileWatch.followEvents(at: path, interval: .zero), "EINVAL"),
                (FileWatch.followEvents(at: ""), "ENOENT"),
                (FileWatch.followEvents(at: path + "\0x"), "EINVAL"),
            ]
            for (signal, name) in refusals {
                let follow = try harness.record(signal)
                let refusal = try XCTUnwrap(try follow.waitForTermination().error as? UVError)
                XCTAssertEqual(refusal.name, name, refusal.description)
                XCTAssertTrue(refusal.context.hasPrefix("FileWatch.follow"), refusal.description)
            }
            XCTAssertEqual(try harness.onLoop { harness.loop.timers.liveCount }, 0)
        }
    }

    /// Disposing stops everything: the file is closed, the directory's watch and the ticks end.
    func testDisposingClosesTheFileTheWatchAndTheTimer() throws {
        try write("x\n")
        let before = InotifyProbe.watchesOfThisProcess()
        try checked { harness in
            let follow = try harness.record(FileWatch.followEvents(at: path, from: .beginning))
            try waitForLog(follow, ["following", "x\n"])
            XCTAssertEqual(try descriptorsOpen(on: path), 1)
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess(), before + 1, "the directory's watch")
            XCTAssertEqual(try harness.onLoop { harness.loop.timers.liveCount }, 1, "the ticks")
            follow.dispose()
            try waitUntilOrThrow("the file to be closed") { try descriptorsOpen(on: path) == 0 }
            try harness.wait(for: "the watch to end") { InotifyProbe.watchesOfThisProcess() == before }
            try harness.wait(for: "the ticks to end") { (try? harness.onLoop { harness.loop.timers.liveCount }) == 0 }
            try harness.wait(for: "the inotify instance to close") { (try? harness.loop.openHandles().count) == 0 }
            try append("y\n")
            XCTAssertEqual(FollowLog.of(follow.events), ["following", "x\n"], "nothing after the dispose")
        }
    }

    /// The loop's shutdown ends a follower with `EventLoopError.shutDown` and closes its file.
    func testTheLoopsShutdownEndsAFollower() throws {
        try write("x\n")
        let loop = EventLoop(name: "follow-shutdown")
        let recorder = Locked<EventRecorder<FileFollow.Event>?>(nil)
        let followed = path
        loop.execute { recorder.withLock { $0 = EventRecorder(FileWatch.followEvents(at: followed, from: .beginning)) } }
        waitUntil("the first bytes") { recorder.current.map { FollowLog.of($0.events) == ["following", "x\n"] } ?? false }
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(recorder.current?.terminal?.error as? EventLoopError, .shutDown(loop: "follow-shutdown"))
        XCTAssertEqual(try descriptorsOpen(on: path), 0)
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The lock file beside a Unix socket (`PATH.lock`): two servers starting at once on one path
/// never both listen; the lock file lives as long as the socket file.
final class UnixSocketLockTests: XCTestCase {
    /// 100 rounds of two servers (`removeStaleSocketFile`, a stale file at the path, so both probe
    /// and unlink) started at the same moment on two loops: each round exactly one listens, the
    /// other fails with EADDRINUSE, and a client connecting to the path reaches the one that listens.
    /// Without the lock, the probe of one between the other's bind and listen unlinked the other's
    /// fresh socket, and both said they listened.
    func testTwoServersStartedAtOnceOnOnePathExactlyOneListensEveryRound() throws {
        try withTemporaryDirectory { directory in
            let rival = EventLoop(name: "rival")
            defer { XCTAssertEqual((try? rival.tryShutdown())?.loopCloseResult, 0) }
            try checked { harness in
                let options = UnixSocketOptions(removeStaleSocketFile: true)
                var bothListened = 0
                for round in 0..<100 {
                    let path = directory + "/race-\(round).sock"
                    try leaveStaleSocketFile(at: path)
                    let servers = [EventRecorder(UnixSocket.serve(path: path, options: options, on: harness.loop), label: "first"),
                                   EventRecorder(UnixSocket.serve(path: path, options: options, on: rival), label: "second")]
                    defer { for server in servers { server.dispose() } }
                    for server in servers {
                        try server.wait(for: "round \(round): listening or an error") { !$0.isEmpty }
                    }
                    let listening = servers.filter { server in
                        if case .listening? = server.values.first { return true } else { return false }
                    }
                    if listening.count == 2 { bothListened += 1 }
                    guard listening.count == 1, let winner = listening.first, let loser = servers.first(where: { $0 !== winner }) else {
                        XCTFail("round \(round): \(listening.count) servers listen: \(servers.map(\.events))")
                        continue
                    }
                    let error = try XCTUnwrap(loser.terminal?.error as? UVError, "round \(round): \(loser.events)")
                    XCTAssertEqual(error.name, "EADDRINUSE", "round \(round): \(error)")
                    let client = try UnixBlockingClient(path: path)
                    defer { client.close() }
                    try winner.wait(for: "round \(round): the client accepted") { events in
                        events.contains { if case .next(.accepted) = $0 { return true } else { return false } }
                    }
                }
                XCTAssertEqual(bothListened, 0, "rounds where both servers said they listen")
                for server in [harness.loop, rival] {
                    waitUntil("loop \(server.name) has no open handle", timeout: .seconds(60)) { (try? server.openHandles()) == [] }
                }
                XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".lock") }, [],
                               "a lock file outlived its server")
            }
        }
    }

    /// The lock file is there while the server listens and gone once it stops; a second server on
    /// the path fails with EADDRINUSE naming it, and leaves the first one's socket alone.
    func testTheLockFileLivesAsLongAsTheSocketFile() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/locked.sock"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path), label: "server")
                _ = try server.waitForValues(1)
                XCTAssertEqual(fileType(path + ".lock"), S_IFREG)
                let second = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(removeStaleSocketFile: true)),
                                                label: "second")
                let error = try XCTUnwrap(second.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EADDRINUSE")
                XCTAssertTrue(error.message.contains(path + ".lock"), error.message)
                XCTAssertEqual(fileType(path), S_IFSOCK, "the second server touched the first one's socket")
                XCTAssertEqual(fileType(path + ".lock"), S_IFREG, "the second server removed the first one's lock file")
                server.dispose()
                try harness.wait(for: "the listener to close") { (try? harness.loop.openHandles()) == [] }
                XCTAssertNil(fileType(path))
                XCTAssertNil(fileType(path + ".lock"))
            }
        }
    }

    /// A lock file a crashed server left behind is taken (nobody holds it) and removed after; a
    /// symbolic link in its place is never followed: ELOOP, and nothing is bound; a FIFO there is
    /// EADDRINUSE (and its open does not wait for a writer).
    func testALeftoverLockFileIsTakenAndASymbolicLinkThereIsELOOP() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/leftover.sock"
            XCTAssertTrue(FileManager.default.createFile(atPath: path + ".lock", contents: nil))
            let linked = directory + "/linked.sock"
            XCTAssertEqual(symlink(directory + "/elsewhere", linked + ".lock"), 0)
            let fifo = directory + "/fifo.sock"
            XCTAssertEqual(mkfifo(fifo + ".lock", 0o600), 0)
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path), label: "server")
                _ = try server.waitForValues(1)
                server.dispose()
                try harness.wait(for: "the listener to close") { (try? harness.loop.openHandles()) == [] }
                XCTAssertNil(fileType(path + ".lock"), "the leftover lock file was not removed")

                let refused = try harness.record(UnixSocket.serve(path: linked), label: "linked")
                let error = try XCTUnwrap(refused.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "ELOOP")
                XCTAssertTrue(error.message.contains("symbolic link"), error.message)
                XCTAssertNil(fileType(linked), "a socket was bound")
                XCTAssertNil(fileType(directory + "/elsewhere"), "the link was followed")

                let onFIFO = try harness.record(UnixSocket.serve(path: fifo), label: "fifo")
                let fifoError = try XCTUnwrap(onFIFO.waitForTermination(timeout: .seconds(60)).error as? UVError)
                XCTAssertEqual(fifoError.name, "EADDRINUSE")
                XCTAssertTrue(fifoError.message.contains("not a regular file"), fifoError.message)
                XCTAssertNil(fileType(fifo), "a socket was bound")
            }
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

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
    /// 500 rounds of four servers (`removeStaleSocketFile`, a stale file at the path, so each probes
    /// and unlinks) started at the same moment on four loops: each round exactly one listens, the
    /// others fail with EADDRINUSE, and a client connecting to the path reaches the one that listens.
    /// Without the lock, one's probe between another's bind and listen (or its unlink after another's
    /// bind) removed that one's fresh socket, and two said they listened.
    func testServersStartedAtOnceOnOnePathExactlyOneListensEveryRound() throws {
        try withTemporaryDirectory { directory in
            let rivals = (1...3).map { EventLoop(name: "rival-\($0)") }
            defer { for rival in rivals { XCTAssertEqual((try? rival.tryShutdown())?.loopCloseResult, 0) } }
            try checked { harness in
                let loops = [harness.loop] + rivals
                let options = UnixSocketOptions(removeStaleSocketFile: true)
                var roundsWithSeveral = 0
                for round in 0..<500 {
                    let path = directory + "/race-\(round).sock"
                    try leaveStaleSocketFile(at: path)
                    let servers = startTogether(loops.count) { index in
                        EventRecorder(UnixSocket.serve(path: path, options: options, on: loops[index]), label: "server \(index)")
                    }
                    defer { for server in servers { server.dispose() } }
                    for server in servers {
                        try server.wait(for: "round \(round): listening or an error", timeout: .seconds(60)) { !$0.isEmpty }
                    }
                    let listening = servers.filter { server in
                        if case .listening? = server.values.first { return true } else { return false }
                    }
                    if listening.count > 1 { roundsWithSeveral += 1 }
                    guard listening.count == 1, let winner = listening.first else {
                        XCTFail("round \(round): \(listening.count) servers listen: \(servers.map(\.events))")
                        continue
                    }
                    for loser in servers where loser !== winner {
                        let error = try XCTUnwrap(loser.terminal?.error as? UVError, "round \(round): \(loser.events)")
                        XCTAssertEqual(error.name, "EADDRINUSE", "round \(round): \(error)")
                    }
                    let client = try UnixBlockingClient(path: path)
                    defer { client.close() }
                    try winner.wait(for: "round \(round): the client accepted", timeout: .seconds(60)) { events in
                        events.contains { if case .next(.accepted) = $0 { return true } else { return false } }
                    }
                }
                XCTAssertEqual(roundsWithSeveral, 0, "rounds where several servers said they listen")
                for loop in loops {
                    waitUntil("loop \(loop.name) has no open handle", timeout: .seconds(60)) { (try? loop.openHandles()) == [] }
                }
                XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".lock") }, [],
                               "a lock file outlived its server")
            }
        }
    }

    /// The race made certain: another server holds the path's lock and has bound its socket but not
    /// listened yet (a probe of it is refused, as of a stale file). A server with
    /// `removeStaleSocketFile` fails with EADDRINUSE and leaves that socket alone, which then listens
    /// and is reached at the path. Without the lock, the probe's refusal made it unlink that fresh
    /// socket and bind its own: both would say "listening", one on an unlinked file.
    func testAServerBetweenItsBindAndItsListenIsLeftAlone() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/starting.sock"
            let lock = open(path + ".lock", O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
            XCTAssertGreaterThanOrEqual(lock, 0)
            defer { close(lock) }
            XCTAssertEqual(flock(lock, LOCK_EX), 0)
            let starting = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(starting) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
            XCTAssertEqual(withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(starting, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }, 0)
            var before = stat()
            XCTAssertEqual(lstat(path, &before), 0)
            try checked { harness in
                let second = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(removeStaleSocketFile: true)),
                                                label: "second")
                let error = try XCTUnwrap(second.waitForTermination().error as? UVError, "\(second.events)")
                XCTAssertEqual(error.name, "EADDRINUSE")
                XCTAssertTrue(error.message.contains("it holds the lock file \(path).lock"), error.message)
            }
            var after = stat()
            XCTAssertEqual(lstat(path, &after), 0, "the starting server's socket file was removed")
            XCTAssertEqual(after.st_ino, before.st_ino, "the path names another socket now")
            XCTAssertEqual(listen(starting, 4), 0)
            let client = try UnixBlockingClient(path: path)
            defer { client.close() }
            XCTAssertGreaterThanOrEqual(accept(starting, nil, nil), 0, "the client did not reach the starting server")
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

    /// Runs `start(index)` for each index on a thread of its own, all released at once (a spin on a
    /// counter, on plain threads: no loop waits), and returns what they made, in index order.
    private func startTogether<T>(_ count: Int, _ start: @escaping @Sendable (Int) -> T) -> [T] {
        let arrived = Locked(0)
        let made = Locked<[Int: T]>([:])
        runConcurrently(count) { index in
            arrived.withLock { $0 += 1 }
            while arrived.current < count { sched_yield() }
            let value = start(index)
            made.withLock { $0[index] = value }
        }
        return (0..<count).map { made.current[$0]! }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

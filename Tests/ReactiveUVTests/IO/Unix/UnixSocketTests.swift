import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class UnixSocketTests: XCTestCase {
    /// Connect over a socket file, write both ways, half-close, answer after EOF, close: each step seen on both ends.
    func testAConversationOverASocketFileBothWaysWithHalfCloseAndClose() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/echo.sock"
            try checked { harness in
                // Half-open: the server answers after the client's EOF (the default closes after it).
                let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(allowHalfOpen: true)), label: "server")
                guard case .listening(let listening)? = try server.waitForValues(1).first else {
                    return XCTFail("the first event was not .listening: \(server.values)")
                }
                XCTAssertEqual(listening, path)
                XCTAssertEqual(fileType(path), S_IFSOCK, "no socket file at the path")

                let client = try harness.record(UnixSocket.connect(path: path), label: "client")
                let clientConnection = try client.waitForValues(1)[0]
                let serverConnection = try waitForAcceptedUnix(server, 1)[0]
                XCTAssertEqual(clientConnection.path, path)
                XCTAssertEqual(serverConnection.path, path)
                XCTAssertEqual(clientConnection.description, "unix \(path)")

                let serverBytes = try harness.record(serverConnection.bytes, label: "server bytes")
                let clientBytes = try harness.record(clientConnection.bytes, label: "client bytes")
                XCTAssertTrue(try harness.record(clientConnection.write(Array("hello".utf8))).waitForTermination().isCompleted)
                XCTAssertEqual(try waitForBytes(serverBytes, 5), Array("hello".utf8))
                serverConnection.send(Array("world".utf8))  // from the test thread: hopped to the loop
                XCTAssertEqual(try waitForBytes(clientBytes, 5), Array("world".utf8))

                XCTAssertTrue(try harness.record(clientConnection.shutdown()).waitForTermination().isCompleted)
                XCTAssertTrue(try serverBytes.waitForTermination().isCompleted, "the server reads EOF")
                XCTAssertTrue(try harness.record(serverConnection.write(Array("bye".utf8))).waitForTermination().isCompleted)
                XCTAssertEqual(try waitForBytes(clientBytes, 8), Array("worldbye".utf8))

                XCTAssertTrue(try harness.record(serverConnection.close()).waitForTermination().isCompleted)
                XCTAssertTrue(try clientBytes.waitForTermination().isCompleted, "the client reads EOF")
                clientConnection.close()
                XCTAssertTrue(try client.waitForTermination().isCompleted, "the connect signal completes when its connection closes")
                try harness.wait(for: "only the listener open") { (try? harness.loop.openHandles().count) == 1 }
            }
        }
    }

    /// A connection past `maxConnections` is accepted and closed at once, reported as `.refused`; the open one is kept.
    func testMaxConnectionsTurnsAwayTheClientBeyondTheLimit() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/limited.sock"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(maxConnections: 1)),
                                                label: "server")
                _ = try server.waitForValues(1)
                let first = try harness.record(UnixSocket.connect(path: path), label: "first")
                _ = try first.waitForValues(1)
                _ = try waitForAcceptedUnix(server, 1)
                let second = try harness.record(UnixSocket.connect(path: path), label: "second")
                let secondConnection = try second.waitForValues(1)[0]
                let secondBytes = try harness.record(secondConnection.bytes, label: "second bytes")
                XCTAssertNotNil(try secondBytes.waitForTermination(), "the refused client's bytes end")
                try server.wait(for: ".refused") { events in
                    events.contains { if case .next(.refused(open: 1)) = $0 { return true } else { return false } }
                }
                XCTAssertEqual(accepted(unix: server).count, 1)
                XCTAssertTrue(accepted(unix: server)[0].isOpen, "the first connection was closed too")
            }
        }
    }

    /// A socket file left behind is EADDRINUSE naming the option; with `removeStaleSocketFile` it is removed and bound.
    func testAStaleSocketFileIsEADDRINUSEUntilRemoveStaleSocketFileRemovesIt() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/stale.sock"
            try leaveStaleSocketFile(at: path)
            try checked { harness in
                let refused = try harness.record(UnixSocket.serve(path: path), label: "without the option")
                let error = try XCTUnwrap(refused.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EADDRINUSE")
                XCTAssertTrue(error.message.contains("removeStaleSocketFile"), error.message)
                XCTAssertEqual(fileType(path), S_IFSOCK, "the file was removed without the option")

                let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(removeStaleSocketFile: true)),
                                                label: "with the option")
                guard case .listening? = try server.waitForValues(1).first else { return XCTFail("\(server.events)") }
                let client = try harness.record(UnixSocket.connect(path: path), label: "client")
                XCTAssertEqual(try client.waitForValues(1).count, 1, "the new server does not accept")
            }
        }
    }

    /// The option never removes a socket a server listens on, nor a file that is not a socket.
    func testRemoveStaleSocketFileLeavesALiveSocketAndAnOrdinaryFile() throws {
        try withTemporaryDirectory { directory in
            let live = directory + "/live.sock"
            let ordinary = directory + "/ordinary"
            XCTAssertTrue(FileManager.default.createFile(atPath: ordinary, contents: Data("keep".utf8)))
            try checked { harness in
                let options = UnixSocketOptions(removeStaleSocketFile: true)
                let first = try harness.record(UnixSocket.serve(path: live), label: "first server")
                _ = try first.waitForValues(1)
                let second = try harness.record(UnixSocket.serve(path: live, options: options), label: "second server")
                let error = try XCTUnwrap(second.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EADDRINUSE")
                // Our own server holds the path's lock: the second stops there, before any probe.
                XCTAssertTrue(error.message.contains("it holds the lock file \(live).lock"), error.message)
                let client = try harness.record(UnixSocket.connect(path: live), label: "client of the first")
                _ = try client.waitForValues(1)
                _ = try waitForAcceptedUnix(first, 1)

                // Another program's server takes no lock: the probe finds it listening.
                let foreign = directory + "/foreign.sock"
                let foreignServer = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                defer { close(foreignServer) }
                var address = sockaddr_un()
                address.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(foreign.utf8)) }
                XCTAssertEqual(withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(foreignServer, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }, 0)
                XCTAssertEqual(listen(foreignServer, 4), 0)
                let third = try harness.record(UnixSocket.serve(path: foreign, options: options), label: "on a foreign server's path")
                let probeError = try XCTUnwrap(third.waitForTermination().error as? UVError)
                XCTAssertEqual(probeError.name, "EADDRINUSE")
                XCTAssertTrue(probeError.message.contains("a server is listening"), probeError.message)
                XCTAssertEqual(fileType(foreign), S_IFSOCK, "the foreign server's socket file was removed")

                let onFile = try harness.record(UnixSocket.serve(path: ordinary, options: options), label: "on a file")
                let fileError = try XCTUnwrap(onFile.waitForTermination().error as? UVError)
                XCTAssertEqual(fileError.name, "EADDRINUSE")
                XCTAssertTrue(fileError.message.contains("not a socket"), fileError.message)
                XCTAssertEqual(try String(contentsOfFile: ordinary, encoding: .utf8), "keep")
            }
        }
    }

    /// `permissions` sets the socket file's mode (after bind, before listen).
    func testPermissionsAreAppliedToTheSocketFile() throws {
        try serving(permissions: 0o640) { server, path in
            _ = try server.waitForValues(1)
            var status = stat()
            XCTAssertEqual(lstat(path, &status), 0)
            XCTAssertEqual(status.st_mode & 0o777, 0o640)
        }
    }

    /// A server on a socket file in a temporary directory, asked for `permissions`; `body` gets its recorder and the path.
    private func serving(permissions: mode_t,
                         _ body: (EventRecorder<UnixSocket.Event>, String) throws -> Void) throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/server.sock"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path, options: UnixSocketOptions(permissions: permissions)),
                                                label: "server")
                try body(server, path)
            }
        }
    }

    /// A mode with bits beyond 0o7777 fails the server with EINVAL naming it, before any socket file is made
    /// (chmod would keep only the low bits: 0o100660 would have served with 0o660 without a word).
    func testPermissionsBeyondTheModeBitsAreEINVALBeforeBinding() throws {
        try serving(permissions: 0o100660) { server, path in
            let terminal = try server.waitForTermination()
            XCTAssertEqual(uvErrorName(terminal), "EINVAL")
            guard case .error(let error as UVError) = terminal else { return XCTFail("\(terminal)") }
            XCTAssertTrue(error.message.contains("0o100660"), error.message)
            XCTAssertNil(fileType(path), "a socket file was made")
        }
    }

    /// Disposing the server removes the socket file it made, but not a file put at the path since.
    func testDisposingTheServerRemovesItsSocketFileButNotAReplacement() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/owned.sock"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path), label: "server")
                _ = try server.waitForValues(1)
                XCTAssertEqual(fileType(path), S_IFSOCK)
                server.dispose()
                try harness.wait(for: "the socket file removed") { fileType(path) == nil }

                let again = try harness.record(UnixSocket.serve(path: path), label: "second server")
                _ = try again.waitForValues(1)
                XCTAssertEqual(unlink(path), 0)
                XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("someone else's".utf8)))
                again.dispose()
                try harness.wait(for: "the listener closed") { (try? harness.loop.openHandles().count) == 0 }
                XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "someone else's",
                               "the server removed a file it did not create")
            }
        }
    }

    /// A Linux abstract name (leading NUL) serves without a file; permissions there are EINVAL.
    func testAnAbstractNameServesWithoutAFile() throws {
        let name = "\0reactiveuv-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try checked { harness in
            let server = try harness.record(UnixSocket.serve(path: name), label: "server")
            guard case .listening(let listening)? = try server.waitForValues(1).first else { return XCTFail("\(server.events)") }
            XCTAssertEqual(listening, name)
            let client = try harness.record(UnixSocket.connect(path: name), label: "client")
            let connection = try client.waitForValues(1)[0]
            XCTAssertTrue(connection.description.hasPrefix("unix @reactiveuv-test-"), connection.description)
            let serverConnection = try waitForAcceptedUnix(server, 1)[0]
            let bytes = try harness.record(serverConnection.bytes, label: "server bytes")
            connection.send([1, 2, 3])
            XCTAssertEqual(try waitForBytes(bytes, 3), [1, 2, 3])

            let taken = try harness.record(UnixSocket.serve(path: name), label: "same name")
            XCTAssertEqual(uvErrorName(try taken.waitForTermination()), "EADDRINUSE")
            let withMode = try harness.record(UnixSocket.serve(path: name + "-2", options: UnixSocketOptions(permissions: 0o600)),
                                              label: "permissions")
            XCTAssertEqual(uvErrorName(try withMode.waitForTermination()), "EINVAL")
        }
    }

    // MARK: - bad input

    /// 108 bytes do not fit `sun_path` with its NUL: ENAMETOOLONG naming the limit, no truncated file; 107 bytes work.
    func testAPathLongerThanSunPathIsENAMETOOLONGNeverTruncated() throws {
        try withTemporaryDirectory { directory in
            let prefix = directory + "/"
            let fits = prefix + String(repeating: "a", count: 107 - prefix.utf8.count)
            let tooLong = fits + "b"
            XCTAssertEqual(tooLong.utf8.count, 108)
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: tooLong), label: "server")
                let error = try XCTUnwrap(server.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "ENAMETOOLONG")
                XCTAssertTrue(error.message.contains("108 bytes") && error.message.contains("107"), error.message)
                XCTAssertNil(fileType(fits), "a truncated socket file was created")
                let client = try harness.record(UnixSocket.connect(path: tooLong), label: "client")
                XCTAssertEqual(uvErrorName(try client.waitForTermination()), "ENAMETOOLONG")
                let abstract = try harness.record(UnixSocket.serve(path: "\0" + String(repeating: "x", count: 108)), label: "abstract")
                XCTAssertEqual(uvErrorName(try abstract.waitForTermination()), "ENAMETOOLONG")
                let empty = try harness.record(UnixSocket.serve(path: ""), label: "empty")
                XCTAssertEqual(uvErrorName(try empty.waitForTermination()), "EINVAL")

                let longest = try harness.record(UnixSocket.serve(path: fits), label: "107 bytes")
                guard case .listening? = try longest.waitForValues(1).first else { return XCTFail("\(longest.events)") }
                XCTAssertEqual(fileType(fits), S_IFSOCK)
                let longestClient = try harness.record(UnixSocket.connect(path: fits), label: "107-byte client")
                XCTAssertEqual(try longestClient.waitForValues(1).count, 1)
            }
        }
    }

    /// A path in a directory that does not exist: ENOENT naming the directory, for the server and the client.
    func testAPathInAMissingDirectoryIsENOENTNamingTheDirectory() throws {
        try withTemporaryDirectory { directory in
            let missing = directory + "/missing"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: missing + "/x.sock"), label: "server")
                let error = try XCTUnwrap(server.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "ENOENT")
                XCTAssertTrue(error.message.contains("the directory \(missing) does not exist"), error.message)
                let client = try harness.record(UnixSocket.connect(path: missing + "/x.sock"), label: "client")
                XCTAssertEqual(uvErrorName(try client.waitForTermination()), "ENOENT")
            }
        }
    }

    /// A client of a stale socket file (nobody listens) gets ECONNREFUSED saying so.
    func testConnectingToAStaleSocketFileIsECONNREFUSED() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/stale.sock"
            try leaveStaleSocketFile(at: path)
            try checked { harness in
                let client = try harness.record(UnixSocket.connect(path: path), label: "client")
                let error = try XCTUnwrap(client.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "ECONNREFUSED")
                XCTAssertTrue(error.message.contains("nobody listens"), error.message)
            }
        }
    }

    /// A client of a path that is a regular file, a directory or a FIFO gets ECONNREFUSED saying what is
    /// there (Linux refuses them all as it refuses a stale socket, so a message about a server that
    /// ended would mislead); of an abstract name nobody binds, saying there is no file.
    ///
    /// An abstract name is shown as `ss` shows it, each NUL an `@`, in the message and the context (a
    /// NUL byte makes a log line binary data to its readers); and a socket
    /// file the file system cannot make (`/proc`) is not said to be in a missing directory.
    func testConnectingToAFileThatIsNotASocketIsECONNREFUSEDNamingWhatItIs() throws {
        try withTemporaryDirectory { directory in
            let file = directory + "/config.txt"
            XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
            let fifo = directory + "/fifo"
            XCTAssertEqual(mkfifo(fifo, 0o600), 0)
            try checked { harness in
                for (path, kind) in [(file, "a regular file"), (directory, "a directory"), (fifo, "a FIFO")] {
                    let client = try harness.record(UnixSocket.connect(path: path), label: "client of \(kind)")
                    let error = try XCTUnwrap(client.waitForTermination().error as? UVError)
                    XCTAssertEqual(error.name, "ECONNREFUSED")
                    XCTAssertTrue(error.message.contains("\(path) is \(kind), not a socket"), error.message)
                }
                let abstract = try harness.record(UnixSocket.connect(path: "\0reactiveuv-nobody\0\(getpid())"), label: "abstract")
                let error = try XCTUnwrap(abstract.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "ECONNREFUSED")
                XCTAssertTrue(error.message.contains("nobody listens on the abstract name @reactiveuv-nobody@"), error.message)
                XCTAssertFalse("\(error)".contains("\0"), "a NUL byte in the error: \(error.context)")
                XCTAssertEqual(error.context, "UnixSocket.connect(@reactiveuv-nobody@\(getpid()))")
                let proc = try harness.record(UnixSocket.serve(path: "/proc/reactiveuv.sock"), label: "in /proc")
                let procError = try XCTUnwrap(proc.waitForTermination().error as? UVError)
                XCTAssertEqual(procError.name, "ENOENT")
                XCTAssertTrue(procError.message.contains("the file system of /proc does not make socket files there"), procError.message)
            }
        }
    }

    /// A directory the process may not write to: EACCES for the server (and a socket file it may not write, for the client).
    ///
    /// The tests may run as root, which bypasses file permissions: the subscriptions are made
    /// on the loop thread with that thread's file-system user set to `nobody` (`setfsuid`, per
    /// thread), which drops the bypass for that thread only, for the duration of the bind/connect.
    func testPermissionDeniedIsEACCES() throws {
        try withTemporaryDirectory { directory in
            let locked = directory + "/locked"
            XCTAssertEqual(mkdir(locked, 0o755), 0)
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: directory + "/open.sock",
                                                                 options: UnixSocketOptions(permissions: 0o600)), label: "server")
                _ = try server.waitForValues(1)
                let (serverError, clientError) = try harness.onLoop { () -> (UVError?, UVError?) in
                    let previous = ruv_test_set_thread_fsuid(65_534)
                    defer { _ = ruv_test_set_thread_fsuid(previous) }
                    let denied = EventRecorder(UnixSocket.serve(path: locked + "/x.sock"))
                    let deniedClient = EventRecorder(UnixSocket.connect(path: directory + "/open.sock"))
                    defer { denied.dispose(); deniedClient.dispose() }
                    return (denied.terminal?.error as? UVError, deniedClient.terminal?.error as? UVError)
                }
                XCTAssertEqual(serverError?.name, "EACCES")
                XCTAssertTrue(serverError?.message.contains("permission denied") == true, "\(String(describing: serverError))")
                XCTAssertEqual(clientError?.name, "EACCES")
            }
        }
    }

    // MARK: - helpers

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// The connections a Unix server recorder has accepted so far.
func accepted(unix server: EventRecorder<UnixSocket.Event>) -> [UnixConnection] {
    server.values.compactMap { event in
        if case .accepted(let connection) = event { return connection }
        return nil
    }
}

/// Waits until a Unix server has accepted `count` connections (after `.listening`).
@discardableResult
func waitForAcceptedUnix(_ server: EventRecorder<UnixSocket.Event>, _ count: Int) throws -> [UnixConnection] {
    try server.wait(for: "\(count) accepted") { _ in accepted(unix: server).count >= count }
    return accepted(unix: server)
}

/// Runs `body` with a new directory under the system's temporary directory, removed after.
func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    var template = Array("/tmp/ruv-unix-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed: errno \(errno)") }
    let directory = String(cString: made)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try body(directory)
}

/// The file type bits (`S_IFSOCK`, `S_IFREG`...) of `path`, or nil when nothing is there.
func fileType(_ path: String) -> mode_t? {
    var status = stat()
    guard lstat(path, &status) == 0 else { return nil }
    return status.st_mode & S_IFMT
}

/// Binds a socket to `path` and closes it without removing the file: what a server that crashed leaves.
func leaveStaleSocketFile(at path: String) throws {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
    defer { close(descriptor) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard result == 0 else { throw TestFailure("bind \(path) failed: errno \(errno)") }
}

/// The `UVError` name of a terminal event, or nil.
func uvErrorName<Value>(_ event: Event<Value>) -> String? {
    (event.error as? UVError)?.name
}

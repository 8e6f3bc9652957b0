import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The listen backlog: the system's maximum (`net.core.somaxconn`) by default, a number when
/// given, EINVAL below 1.
///
/// Linux gives no way to read a listening socket's backlog back, so it is counted: the clients
/// connect in one burst on the server's own loop thread, which therefore accepts none of them
/// meanwhile, and every one beyond the backlog is refused (a Unix socket at once, with EAGAIN) or
/// left waiting (TCP drops its SYN).
final class ListenBacklogTests: XCTestCase {
    /// A burst of 1,000 Unix-socket clients (fewer when somaxconn is smaller) all connect to a
    /// server that accepts none of them meanwhile: the default backlog is the system's maximum, not 128.
    func testAUnixServerTakesABurstOfAThousandClientsByDefault() throws {
        let burst = min(1_000, Int(systemMaximumBacklog()))
        try withTemporaryDirectory { directory in
            let path = directory + "/burst.sock"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path), label: "server")
                _ = try server.waitForValues(1)
                let (connected, refusals) = try harness.onLoop(timeout: .seconds(60)) { connectBurst(to: path, count: burst) }
                defer { for descriptor in connected { close(descriptor) } }
                XCTAssertEqual(connected.count, burst, "refused: \(Set(refusals))")
            }
        }
    }

    /// The group form has the same default: its first loop, busy with the burst, accepts none of it.
    func testAUnixGroupServerTakesABurstOfAThousandClientsByDefault() throws {
        let burst = min(1_000, Int(systemMaximumBacklog()))
        try withTemporaryDirectory { directory in
            let path = directory + "/group-burst.sock"
            try withGroup { harness, group in
                let server = try harness.record(UnixSocket.serve(path: path, on: group), label: "server")
                _ = try server.waitForValues(1)
                let outcome = onLoop(group.loops[0], timeout: .seconds(60)) { connectBurst(to: path, count: burst) }
                let (connected, refusals) = try XCTUnwrap(outcome)
                defer { for descriptor in connected { close(descriptor) } }
                XCTAssertEqual(connected.count, burst, "refused: \(Set(refusals))")
            }
        }
    }

    /// An explicit backlog limits the burst: about that many connect, the rest are refused with EAGAIN.
    func testAnExplicitSmallBacklogRefusesTheRestWithEAGAIN() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/small.sock"
            try checked { harness in
                let server = try harness.record(UnixSocket.serve(path: path, backlog: 5), label: "server")
                _ = try server.waitForValues(1)
                let (connected, refusals) = try harness.onLoop(timeout: .seconds(60)) { connectBurst(to: path, count: 40) }
                defer { for descriptor in connected { close(descriptor) } }
                // Linux queues one more than the backlog on a Unix socket (the queue is full past it).
                XCTAssertTrue((5...6).contains(connected.count), "\(connected.count) connected with a backlog of 5")
                XCTAssertEqual(Set(refusals), [EAGAIN])
            }
        }
    }

    /// A TCP server's default is the system's maximum too: 300 clients complete their handshake while
    /// its loop accepts none (with a backlog of 128 the kernel drops the SYNs past 129, and they wait).
    func testATCPServerCompletesABurstOfThreeHundredHandshakesByDefault() throws {
        let burst = min(300, Int(systemMaximumBacklog()))
        try checked { harness in
            let server = try harness.record(TCPServer.serve(port: 0), label: "server")
            guard case .listening(let address)? = try server.waitForValues(1).first else { return XCTFail("\(server.values)") }
            let port = address.port
            // The wait inside is a hang guard: on loopback the handshakes complete at once or never.
            let (completed, sockets) = try harness.onLoop(timeout: .seconds(90)) { tcpHandshakeBurst(port: port, count: burst) }
            defer { for descriptor in sockets { close(descriptor) } }
            XCTAssertEqual(completed, burst)
        }
    }

    /// A backlog below 1 is EINVAL naming the default, for each listener form, before anything is bound.
    func testABacklogBelowOneIsEINVAL() throws {
        try withTemporaryDirectory { directory in
            try withGroup { harness, group in
                let refused: [(String, Signal<Void>)] = [
                    ("unix", UnixSocket.serve(path: directory + "/zero.sock", backlog: 0).map { _ in }),
                    ("unix group", UnixSocket.serve(path: directory + "/negative.sock", backlog: -1, on: group).map { _ in }),
                    ("tcp", TCPServer.serve(port: 0, backlog: 0).map { _ in }),
                    ("tcp group", TCPServer.serve(port: 0, backlog: -5, on: group).map { _ in }),
                ]
                for (form, signal) in refused {
                    let recorder = try harness.record(signal, label: form)
                    let error = try XCTUnwrap(recorder.waitForTermination().error as? UVError, form)
                    XCTAssertEqual(error.name, "EINVAL", form)
                    XCTAssertTrue(error.message.contains("somaxconn"), error.message)
                    XCTAssertTrue(recorder.values.isEmpty, "\(form) listened: \(recorder.values)")
                }
                XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/zero.sock"))
                XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/negative.sock"))
            }
        }
    }

    // MARK: - helpers

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// The harness and a two-loop group, each group loop shut down at the end with nothing left open.
    private func withGroup(_ body: (LoopHarness, EventLoopGroup) throws -> Void) throws {
        let group = EventLoopGroup(loopCount: 2, name: "backlog")
        let report = LoopHarness.run { harness in
            defer {
                _ = harness.finish()
                for loop in group.loops {
                    waitUntil("loop \(loop.name) has no open handle", timeout: .seconds(60)) { (try? loop.openHandles()) == [] }
                    XCTAssertEqual((try? loop.tryShutdown())?.loopCloseResult, 0, "uv_loop_close on \(loop.name)")
                }
            }
            try body(harness, group)
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// `net.core.somaxconn`, as the test reads it.
private func systemMaximumBacklog() -> Int32 {
    guard let text = try? String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8),
          let value = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return SOMAXCONN }
    return value
}

/// `count` non-blocking connects to the Unix socket at `path`, one after the other: the connected
/// descriptors (the caller closes them) and the errno of each refusal.
private func connectBurst(to path: String, count: Int) -> (connected: [Int32], refusals: [Int32]) {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    var connected: [Int32] = []
    var refusals: [Int32] = []
    for _ in 0..<count {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            refusals.append(errno)
            continue
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if result == 0 {
            connected.append(descriptor)
        } else {
            refusals.append(errno)
            close(descriptor)
        }
    }
    return (connected, refusals)
}

/// `count` non-blocking TCP connects to 127.0.0.1:`port`, then a wait (a 30-second hang guard) for
/// their handshakes: how many completed, and the sockets (the caller closes them).
private func tcpHandshakeBurst(port: Int, count: Int) -> (completed: Int, sockets: [Int32]) {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var sockets: [Int32] = []
    for _ in 0..<count {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { continue }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        sockets.append(descriptor)
    }
    var pending = Set(sockets)
    var completed = 0
    let deadline = ContinuousClock.now + .seconds(30)
    while !pending.isEmpty, ContinuousClock.now < deadline {
        var polled = pending.map { pollfd(fd: $0, events: Int16(POLLOUT), revents: 0) }
        guard poll(&polled, nfds_t(polled.count), 100) > 0 else { continue }
        for entry in polled where entry.revents != 0 {
            pending.remove(entry.fd)
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(entry.fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == 0 { completed += 1 }
        }
    }
    return (completed, sockets)
}

import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// A drain requested the moment `.listening` arrives is followed, on every kind of server.
///
/// A subscriber on the server's loop gets `.listening` inside the server's start, so a server
/// that subscribed to its drain requests only after starting would lose a request sent from that
/// callback (and race one sent from another thread): it would never drain.
final class DrainOnListeningTests: XCTestCase {
    func testATCPServerOnOneLoop() throws {
        let loop = EventLoop(name: "drain-on-listening")
        defer { _ = try? loop.tryShutdown() }
        let events = drainRequestedOnListening(home: loop) { drain in
            TCPServer.serve(port: 0, on: loop, drain: drain).map(Self.describe)
        }
        XCTAssertEqual(events, ["listening", "draining 0", "completed"])
    }

    func testATCPServerOnAGroup() throws {
        let group = EventLoopGroup(loopCount: 2, name: "drain-on-listening")
        defer { for loop in group.loops { _ = try? loop.tryShutdown() } }
        // The subscriber is on the group's first loop, where `.listening` is sent.
        let events = drainRequestedOnListening(home: group.loops[0]) { drain in
            TCPServer.serve(port: 0, on: group, drain: drain).map(Self.describe)
        }
        XCTAssertEqual(events, ["listening", "draining 0", "completed"])
    }

    func testAUnixSocketServerOnOneLoopAndOnAGroup() throws {
        try withTemporaryDirectory { directory in
            let loop = EventLoop(name: "drain-on-listening")
            defer { _ = try? loop.tryShutdown() }
            let path = directory + "/one.sock"
            let events = drainRequestedOnListening(home: loop) { drain in
                UnixSocket.serve(path: path, on: loop, drain: drain).map(Self.describe)
            }
            XCTAssertEqual(events, ["listening", "draining 0", "completed"])
            XCTAssertNil(fileType(path), "the drained server's socket file is gone")

            let group = EventLoopGroup(loopCount: 2, name: "drain-on-listening-unix")
            defer { for loop in group.loops { _ = try? loop.tryShutdown() } }
            let groupPath = directory + "/group.sock"
            let groupEvents = drainRequestedOnListening(home: group.loops[0]) { drain in
                UnixSocket.serve(path: groupPath, on: group, drain: drain).map(Self.describe)
            }
            XCTAssertEqual(groupEvents, ["listening", "draining 0", "completed"])
        }
    }

    /// A drain signal that asks at once (its request comes as the server follows it, before the
    /// start): the server ends unbound, `.draining(open: 0)` then completion, no `.listening`, no
    /// socket file left; as a group server does when asked before anything was bound.
    func testADrainRequestedBeforeTheStartEndsEveryServerUnbound() throws {
        try withTemporaryDirectory { directory in
            let loop = EventLoop(name: "drain-before-start")
            defer { _ = try? loop.tryShutdown() }
            let now = Signal<TCPServer.DrainRequest>.return(.graceful(timeout: .seconds(60)))
            let path = directory + "/early.sock"
            XCTAssertEqual(events(of: TCPServer.serve(port: 0, on: loop, drain: now).map(Self.describe), on: loop),
                           ["draining 0", "completed"])
            XCTAssertEqual(events(of: UnixSocket.serve(path: path, on: loop, drain: now).map(Self.describe), on: loop),
                           ["draining 0", "completed"])
            XCTAssertNil(fileType(path), "no socket file was made")
            XCTAssertEqual(try loop.openHandles().filter { ($0.label ?? "").contains("listener") }.count, 0, "nothing listens")
        }
    }

    /// The events of `signal` subscribed on `loop`, until it ends.
    private func events(of signal: Signal<String>, on loop: EventLoop) -> [String] {
        drainRequestedOnListening(home: loop) { _ in signal }
    }

    /// The events of the server `make` builds, subscribed on `home`, whose subscriber asks for a
    /// graceful drain from inside its `.listening` callback.
    private func drainRequestedOnListening(home: EventLoop,
                                           _ make: @escaping @Sendable (Signal<TCPServer.DrainRequest>) -> Signal<String>) -> [String] {
        let drain = Subject<TCPServer.DrainRequest>()
        let events = Locked<[String]>([])
        let ended = Latch()
        let subscription = onLoop(home) { () -> UncheckedSendable<any Disposable> in
            UncheckedSendable(make(drain).subscribe(next: { event in
                events.withLock { $0.append(event) }
                if event == "listening" { drain.sendNext(.graceful(timeout: .seconds(60))) }
            }, error: { error in
                events.withLock { $0.append("error \(error)") }
                ended.open()
            }, completed: {
                events.withLock { $0.append("completed") }
                ended.open()
            }))
        }?.value
        defer { subscription?.dispose() }
        XCTAssertTrue(ended.wait(until: SchedulerInstant.now + .seconds(10)), "the server never ended: \(events.current)")
        return events.current
    }

    private static func describe(_ event: TCPServer.Event) -> String {
        switch event {
        case .listening: "listening"
        case .accepted: "accepted"
        case .refused: "refused"
        case .draining(let open): "draining \(open)"
        }
    }

    private static func describe(_ event: UnixSocket.Event) -> String {
        switch event {
        case .listening: "listening"
        case .accepted: "accepted"
        case .refused: "refused"
        case .draining(let open): "draining \(open)"
        }
    }
}

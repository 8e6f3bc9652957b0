@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Simulated twins of server tests that wait on real seconds (`TCPDrainTests`, `ConnectionDrainTests`,
/// `TCPIdleTimeoutTests`, `UnixIdleTimeoutTests`): the same server code on virtual time, so each deadline is asserted at
/// its exact instant instead of "not before". The real tests stay: they cover libuv's sockets and
/// the kernel's idle record, which the simulation bypasses.
final class SimulatedServerDeadlineTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// `TCPServer.serve` on loop "server" at port 7000, draining with `request` at 10 ms.
    private func drainingServer(_ simulation: Simulation, _ request: TCPServer.DrainRequest,
                                options: TCPOptions = TCPOptions()) throws -> (EventLoop, EventRecorder<TCPServer.Event>) {
        let server = simulation.makeLoop(name: "server")
        let drain = Signal<Void>.timer(after: .milliseconds(10), on: server).map { _ in request }
        return (server, try simulation.record(TCPServer.serve(port: 7000, options: options, on: server, drain: drain), on: server))
    }

    private func accepted(_ events: EventRecorder<TCPServer.Event>) -> [TCPConnection] {
        events.values.compactMap { if case .accepted(let connection) = $0 { connection } else { nil } }
    }

    /// Twin of `TCPDrainTests.testASilentClientIsResetAtTheDeadline`.
    func testASilentClientIsResetAtExactlyTheDrainDeadline() throws {
        Simulation.check(seed: 151) { simulation in
            let (server, events) = try drainingServer(simulation, .graceful(timeout: .milliseconds(300)))
            let client = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { $0.bytes })
            simulation.run(for: .milliseconds(5))
            let connection = try XCTUnwrap(accepted(events).first, "\(events.recorded)")
            let served = try simulation.record(connection.bytes, on: server)
            simulation.runUntilIdle()

            // Drain at 10 ms, deadline 300 ms later: the server end is reset then, the RST lands 1 ms later.
            XCTAssertEqual(served.recorded.map(\.time), [ms(310)])
            guard case .completed? = served.terminal else { return XCTFail("its bytes complete: \(served.recorded)") }
            XCTAssertEqual((client.terminal?.error as? UVError)?.name, "ECONNRESET")
            XCTAssertEqual(client.recorded.map(\.time), [ms(311)])
            guard case .completed? = events.terminal else { return XCTFail("\(events.recorded)") }
            XCTAssertEqual(events.recorded.last?.time, ms(310))
            XCTAssertFalse(connection.isOpen)
        }
    }

    /// Twin of the deadline test of `ConnectionDrainTests` (`closingIdle` with a busy connection).
    func testADrainClosingIdleClosesTheIdleAtOnceAndResetsTheBusyAtExactlyTheDeadline() throws {
        Simulation.check(seed: 152) { simulation in
            let (server, events) = try drainingServer(simulation, .graceful(timeout: .milliseconds(300), closingIdle: true))
            let idle = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { $0.bytes })
            let busy = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([7])
                return connection.bytes
            })
            simulation.run(for: .milliseconds(5))
            let connections = accepted(events)
            XCTAssertEqual(connections.count, 2)
            // The server reads every connection and never answers: the one that sent a byte is busy from then.
            let reads = try connections.map { try simulation.record($0.bytes, on: server) }
            simulation.runUntilIdle()

            XCTAssertEqual(reads.map { $0.values.joined().count }.sorted(), [0, 1], "the busy one's byte was read")
            guard case .completed? = idle.terminal else { return XCTFail("the idle client reads an end: \(idle.recorded)") }
            XCTAssertEqual(idle.recorded.map(\.time), [ms(11)], "closed gracefully at the drain's start, FIN 1 ms later")
            XCTAssertEqual((busy.terminal?.error as? UVError)?.name, "ECONNRESET")
            XCTAssertEqual(busy.recorded.last?.time, ms(311), "reset at the 310 ms deadline, not before")
            XCTAssertEqual(events.recorded.last?.time, ms(310))
            guard case .completed? = events.terminal else { return XCTFail("\(events.recorded)") }
        }
    }

    /// Twin of `TCPIdleTimeoutTests.testAnActiveClientIsKeptPastSeveralTimeouts`: two seconds of a
    /// byte every 50 ms past a 1 s idle timeout, then silence.
    func testAnActiveClientIsKeptPastSeveralIdleTimeoutsAndClosedAtAnExactInstantOnceSilent() throws {
        Simulation.check(seed: 153) { simulation in
            let server = simulation.makeLoop(name: "server")
            let events = try simulation.record(TCPServer.serve(port: 7000, options: TCPOptions(idleTimeout: .seconds(1)), on: server),
                                               on: server)
            let client = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000))
            simulation.run(for: .milliseconds(5))
            let connection = try XCTUnwrap(accepted(events).first, "\(events.recorded)")
            let served = try simulation.record(connection.bytes, on: server)
            let outgoing = try XCTUnwrap(client.values.first)
            let end = try simulation.record(outgoing.bytes)
            _ = try simulation.record(Signal<Int>.interval(.milliseconds(50)).take(40).map { tick in
                outgoing.send([UInt8(tick)])
                return tick
            })
            // The server's idle check repeats while it listens: run for a time, not until idle.
            simulation.run(for: .seconds(4))

            XCTAssertEqual(served.values.joined().count, 40, "every byte read while the client was active")
            let error = try XCTUnwrap(served.terminal?.error as? UVError, "\(served.recorded)")
            XCTAssertEqual(error.name, "ETIMEDOUT")
            XCTAssertTrue("\(error)".contains("TCPOptions.idleTimeout"), "\(error)")
            // The last byte left at 2005 ms and was read at 2006 ms. The check runs every quarter of the
            // timeout (250 ms): at 3000 ms the connection had been silent 994 ms, at 3250 ms past the limit.
            XCTAssertEqual(served.recorded.last?.time, ms(3_250))
            guard case .completed? = end.terminal else { return XCTFail("the client reads an end: \(end.recorded)") }
            XCTAssertEqual(end.recorded.last?.time, ms(3_251))
            XCTAssertNil(events.terminal, "the server goes on")
        }
    }

    /// Twin of `UnixIdleTimeoutTests.testAClientSendingToAConnectionNobodyReadsIsKeptUntilItFallsSilent`:
    /// bytes nobody reads count as activity; once the client falls silent the connection is closed.
    func testAUnixClientSendingToAConnectionNobodyReadsIsKeptUntilItFallsSilentThenClosedAtAnExactInstant() throws {
        Simulation.check(seed: 154) { simulation in
            let server = simulation.makeLoop(name: "server")
            let events = try simulation.record(UnixSocket.serve(path: "/run/unread.sock", options: UnixSocketOptions(idleTimeout: .seconds(1)),
                                                                on: server), on: server)
            let client = try simulation.record(UnixSocket.connect(path: "/run/unread.sock"))
            simulation.run(for: .milliseconds(5))
            let connection = try XCTUnwrap(events.values.compactMap { if case .accepted(let c) = $0 { c } else { nil } }.first,
                                           "\(events.recorded)")
            let outgoing = try XCTUnwrap(client.values.first)
            let end = try simulation.record(outgoing.bytes)
            _ = try simulation.record(Signal<Int>.interval(.milliseconds(50)).take(40).map { tick in
                outgoing.send([UInt8(tick)])
                return tick
            })
            simulation.run(for: .milliseconds(2_100))
            XCTAssertTrue(connection.isOpen, "kept while the client sends, read or not")
            simulation.run(for: .seconds(2))
            XCTAssertFalse(connection.isOpen)
            guard case .completed? = end.terminal else { return XCTFail("the client reads an end: \(end.recorded)") }
            // The last byte arrived at 2006 ms, unread; checks every 250 ms: closed at 3250 ms, FIN read 1 ms later.
            XCTAssertEqual(end.recorded.last?.time, ms(3_251))
            XCTAssertNil(events.terminal, "the server goes on")
        }
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

// GUIDE-NETWORKLESS-SHIPPER-BEGIN
import ReactiveUV

/// The collector hung up: the shipper reconnects.
struct CollectorHungUp: Error {}

/// Ships `lines` to the collector on 127.0.0.1:`port`: batches of up to `count` lines, or what
/// came within `window`, one write each. When the connection fails or the collector hangs up,
/// it reconnects after `backoff`'s waits (from the first again once a batch went out); lines
/// that come while it is away are dropped. Sends each batch's size.
func shipLogs(_ lines: Signal<String>, port: Int, count: Int = 100, window: Duration = .milliseconds(200),
              backoff: Backoff) -> Signal<Int> {
    TCP.connect(host: "127.0.0.1", port: port)
        .flatMap { connection in
            // The collector sends nothing: its end (or reset) ends this connection's attempt.
            let hangUp = connection.bytes.then(Signal<Int>.error(CollectorHungUp()))
            let batches = lines.buffer(every: window, count: count).map { batch in
                connection.send(batch.map { $0 + "\n" }.joined())
                return batch.count
            }
            return batches.merge(with: hangUp)
        }
        .retry(backoff: backoff)
}

/// The collector: every line any shipper sends it; a shipper that goes away is forgotten.
func collectLines(port: Int) -> Signal<String> {
    TCPServer.serve(port: port).flatMap { event -> Signal<String> in
        guard case .accepted(let connection) = event else { return .empty }
        return connection.bytes.lines().map { String(decoding: $0, as: UTF8.self) }.catchTo(.empty)
    }
}
// GUIDE-NETWORKLESS-SHIPPER-END

/// Keeps the examples of docs/guides/testing-without-a-network.md compiling (each block equals
/// the code between its markers) and runs them: they are tests themselves.
final class GuideNetworklessExampleTests: XCTestCase {
    static let guide = "docs/guides/testing-without-a-network.md"

    func testTheShipperIsThisCode() throws {
        try assertDocumentBlock(Self.guide, containing: "func shipLogs(", matches: "GUIDE-NETWORKLESS-SHIPPER")
    }

    func testTheBatchingExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock(Self.guide, containing: "[100, 100, 50]", matches: "GUIDE-NETWORKLESS-BATCHING")
        // The example run twice: the same seeds give the same traces (the check mode, for an example
        // that makes its own simulations, as a user would).
        func example() throws -> [UInt64] {
            // GUIDE-NETWORKLESS-BATCHING-BEGIN
            let simulation = Simulation(seed: 1)
            let collector = simulation.makeLoop(name: "collector")
            let received = try simulation.record(collectLines(port: 5140), on: collector)
            let lines = Subject<String>()
            let batches = try simulation.record(shipLogs(lines, port: 5140, backoff: .exponential(initial: .milliseconds(100),
                                                                                                    maximum: .seconds(5))))
            simulation.run(for: .milliseconds(10))  // connected: 1 ms there, 1 ms back
            try simulation.perform { for number in 1...250 { lines.sendNext("line \(number)") } }
            simulation.run(for: .seconds(1))

            XCTAssertEqual(batches.values, [100, 100, 50])
            let ms = { (value: UInt64) in SchedulerInstant(nanoseconds: value * 1_000_000) }
            XCTAssertEqual(batches.recorded.map(\.time), [ms(10), ms(10), ms(210)])  // the last 50 waited 200 ms
            XCTAssertEqual(received.values, (1...250).map { "line \($0)" })
            XCTAssertEqual(received.recorded.last?.time, ms(211))  // and crossed in 1 ms
            XCTAssertEqual(simulation.finish().problems, [])  // nothing left open, no timer pending
            // GUIDE-NETWORKLESS-BATCHING-END
            return [simulation.traceHash]
        }
        XCTAssertEqual(try example(), try example())
    }

    func testTheReconnectExampleIsThisCodeAndPasses() throws {
        try assertDocumentBlock(Self.guide, containing: ".reset(connection: 1", matches: "GUIDE-NETWORKLESS-RECONNECT")
        // The example run twice: the same seeds give the same traces (the check mode, for an example
        // that makes its own simulations, as a user would).
        func example() throws -> [UInt64] {
            // GUIDE-NETWORKLESS-RECONNECT-BEGIN
            let ms = { (value: UInt64) in SchedulerInstant(nanoseconds: value * 1_000_000) }
            let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(5), jitter: 0)

            // The collector resets the first connection at 50 ms; the shipper is back 100 ms later.
            let reset = try Simulation(seed: 2, faultPlan: [.reset(connection: 1, at: .milliseconds(50))])
            let collector = reset.makeLoop(name: "collector")
            let received = try reset.record(collectLines(port: 5140), on: collector)
            let lines = Subject<String>()
            _ = try reset.record(shipLogs(lines, port: 5140, count: 1, backoff: backoff))
            reset.run(for: .milliseconds(10))
            try reset.perform { lines.sendNext("before") }
            reset.run(for: .milliseconds(90))
            try reset.perform { lines.sendNext("while away") }  // reset at 50 ms, back at 153 ms
            reset.run(for: .milliseconds(100))
            try reset.perform { lines.sendNext("after") }
            reset.run(for: .seconds(1))
            XCTAssertEqual(received.values, ["before", "after"])
            XCTAssertEqual(received.recorded.map(\.time), [ms(11), ms(201)])
            XCTAssertEqual(reset.finish().problems, [])

            // No collector until 500 ms: refused at 2 ms, then after waits of 100, 200 and 400 ms.
            let late = Simulation(seed: 3)
            let lateLines = Subject<String>()
            _ = try late.record(shipLogs(lateLines, port: 5140, count: 1, backoff: backoff))
            late.run(for: .milliseconds(500))
            let lateReceived = try late.record(collectLines(port: 5140), on: late.makeLoop(name: "collector"))
            late.run(for: .milliseconds(200))
            try late.perform { lateLines.sendNext("at 700 ms: not connected yet") }  // attempt 4 leaves at 706 ms
            late.run(for: .milliseconds(10))
            try late.perform { lateLines.sendNext("at 710 ms") }
            late.run(for: .seconds(1))
            XCTAssertEqual(lateReceived.values, ["at 710 ms"])
            XCTAssertEqual(lateReceived.recorded.map(\.time), [ms(711)])
            XCTAssertEqual(late.finish().problems, [])
            // GUIDE-NETWORKLESS-RECONNECT-END
            return [reset.traceHash, late.traceHash]
        }
        XCTAssertEqual(try example(), try example())
    }
}

import EchoServerKit
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `Simulation.timeline`: what each peer's streams read and when, for assertions over I/O.
final class SimulatedTimelineTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testTheTimelineSaysWhatEachPeerReceivedAndWhen() throws {
        Simulation.check(seed: 61) { simulation in
            simulation.recordsTimeline = true
            let server = simulation.makeLoop(name: "server")
            _ = try simulation.record(EchoServer.run(port: 7000), on: server)
            let loop = simulation.loop
            let echoed = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection -> Signal<[UInt8]> in
                connection.send(Array("hello".utf8))
                _ = loop.schedule(after: .milliseconds(10)) {
                    connection.send(Array("world".utf8))
                    connection.shutdown()
                }
                return connection.bytes
            })
            simulation.runUntilIdle()
            XCTAssertEqual(Array(echoed.values.joined()), Array("helloworld".utf8))
            let onServer = simulation.timeline.filter { $0.loopName == "server" }
            let onClient = simulation.timeline.filter { $0.loopName == "sim" }
            // Connected at 2 ms (SYN, answer); each packet takes the link's 1 ms.
            XCTAssertEqual(onServer.map(\.content), [.bytes(Array("hello".utf8)), .bytes(Array("world".utf8)), .endOfFile])
            XCTAssertEqual(onServer.map(\.time), [ms(3), ms(13), ms(13)])
            XCTAssertEqual(onClient.map(\.content), [.bytes(Array("hello".utf8)), .bytes(Array("world".utf8)), .endOfFile])
            XCTAssertEqual(onClient.map(\.time), [ms(4), ms(14), ms(14)], "each echo a link's latency after the server read it")
            XCTAssertEqual(Set(onClient.map(\.peer)), ["127.0.0.1:7000"], "the client's stream reads from the server")
            XCTAssertEqual(simulation.bytesReceived(on: server), Array("helloworld".utf8))
            XCTAssertEqual(simulation.bytesReceived(on: server, from: "nobody"), [])
            XCTAssertEqual(onServer.first?.description, "3.000 ms  loop 'server' from \(onServer[0].peer): 5 bytes")
        }
    }

    func testTheTimelineIsOffByDefaultAndKeepsOnlyWhatCameWhileOn() throws {
        Simulation.check(seed: 62) { simulation in
            let server = simulation.makeLoop(name: "server")
            _ = try simulation.record(EchoServer.run(port: 7000), on: server)
            let loop = simulation.loop
            _ = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection -> Signal<[UInt8]> in
                connection.send([1])
                _ = loop.schedule(after: .milliseconds(10)) { connection.send([2]); connection.shutdown() }
                return connection.bytes
            })
            simulation.run(for: .milliseconds(5))
            XCTAssertTrue(simulation.timeline.isEmpty, "nothing is kept until asked")
            simulation.recordsTimeline = true
            simulation.runUntilIdle()
            XCTAssertEqual(simulation.bytesReceived(on: server), [2], "only what was read after it was turned on")
            simulation.recordsTimeline = false
            XCTAssertFalse(simulation.recordsTimeline)
        }
    }
}

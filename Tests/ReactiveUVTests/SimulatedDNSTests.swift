import EchoServerKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// Names on a simulation's network: `DNS.resolve`, `TCP.connect(host:)` and a server's host name
/// resolve through the simulation's host table, unknown names fail as a real lookup does, and DNS
/// failures come from a plan or the seed.
final class SimulatedDNSTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testANamedHostResolvesToItsAddressesInOrderAfterARoundTrip() throws {
        Simulation.check(seed: 71) { simulation in
            try simulation.addHost("DB.internal", addresses: ["10.0.0.5", "fd00::5"])
            let resolved = try simulation.record(DNS.resolve("db.INTERNAL", port: 5432))
            let local = try simulation.record(DNS.resolve("localhost", port: 80))
            simulation.runUntilIdle()
            XCTAssertEqual(resolved.values.first?.map(\.description), ["10.0.0.5:5432", "[fd00::5]:5432"])
            XCTAssertEqual(resolved.recorded.map(\.time), [ms(2), ms(2)], "the answer, then completion, a round trip later")
            guard case .completed? = resolved.terminal else { return XCTFail("\(resolved.recorded)") }
            XCTAssertEqual(local.values.first?.map(\.description), ["127.0.0.1:80", "[::1]:80"])
            let answers = simulation.trace.entries.filter { $0.kind == .timer && $0.time == ms(2) }
            XCTAssertEqual(answers.count, 2)
            XCTAssertTrue(answers.allSatisfy { $0.payload != nil }, "each answer is digested into the trace")
            XCTAssertNotEqual(answers[0].payload, answers[1].payload, "other addresses, another digest")
        }
    }

    func testTheEchoSampleServesANamedHostAndAClientConnectsByName() throws {
        Simulation.check(seed: 72) { simulation in
            try simulation.addHost("echo.internal", addresses: ["10.0.0.7"])
            let server = simulation.makeLoop(name: "server")
            let events = try simulation.record(EchoServer.run(host: "echo.internal", port: 7000), on: server)
            let client = try simulation.record(TCP.connect(host: "echo.internal", port: 7000).flatMap { connection in
                connection.send([1, 2, 3])
                connection.shutdown()
                return connection.bytes
            })
            simulation.runUntilIdle()
            guard case .listening(let address)? = events.values.first else { return XCTFail("\(events.recorded)") }
            XCTAssertEqual(address.description, "10.0.0.7:7000")
            XCTAssertEqual(Array(client.values.joined()), [1, 2, 3])
            // Lookup 2 ms, connect 2 ms, echo 2 ms.
            XCTAssertEqual(client.recorded.first?.time, ms(6))
        }
    }

    func testAnUnknownNameFailsWithEAI_NONAMEForAServerAndAResolveAlike() throws {
        Simulation.check(seed: 73) { simulation in
            let server = try simulation.record(TCPServer.serve(host: "nowhere.internal", port: 7000))
            let resolved = try simulation.record(DNS.resolve("nowhere.internal"))
            simulation.runUntilIdle()
            for recorder in [server.terminal?.error, resolved.terminal?.error] {
                let error = recorder as? UVError
                XCTAssertEqual(error?.code, UVError.nameNotFound.code, "\(String(describing: error))")
                XCTAssertEqual(error?.context, "resolving 'nowhere.internal'")
            }
        }
    }

    func testAPlannedDNSFailureFailsLookupsInItsWindowWithEAI_AGAINAndARetryAfterItSucceeds() throws {
        let plan: [SimulationFault] = [.dnsFailure(host: "db.internal", at: .zero, for: .milliseconds(100))]
        Simulation.check(seed: 74, faultPlan: plan) { simulation in
            try simulation.addHost("db.internal", addresses: ["10.0.0.5"])
            let early = try simulation.record(DNS.resolve("db.internal"))
            let other = try simulation.record(DNS.resolve("localhost"))
            simulation.run(for: .milliseconds(100))
            let atTheEdge = try simulation.record(DNS.resolve("db.internal"))
            simulation.run(for: .milliseconds(1))
            let after = try simulation.record(DNS.resolve("db.internal"))
            simulation.runUntilIdle()
            let error = early.terminal?.error as? UVError
            XCTAssertEqual(error?.code, UVError.nameTemporaryFailure.code, "\(String(describing: error))")
            XCTAssertEqual(error?.context, "resolving 'db.internal'")
            XCTAssertEqual(early.recorded.map(\.time), [ms(2)], "a failed lookup takes its round trip too")
            XCTAssertEqual((atTheEdge.terminal?.error as? UVError)?.code, UVError.nameTemporaryFailure.code, "the window's end is in it")
            XCTAssertEqual(after.values.first?.map(\.host), ["10.0.0.5"])
            XCTAssertEqual(other.values.first?.count, 2, "other names are untouched")
            XCTAssertEqual(simulation.injectedFaults, plan)
        }
    }

    func testDrawnDNSFailuresAreRecordedAndReplayAsAPlanWithTheSameTrace() throws {
        func run(_ simulation: Simulation) throws -> [EventRecorder<[SocketAddress]>] {
            try simulation.setNetworkFaults(SimulationNetworkFaults(dnsFailurePerMille: 500))
            try simulation.addHost("db.internal", addresses: ["10.0.0.5"])
            let lookups = try (0..<8).map { _ in
                let lookup = try simulation.record(DNS.resolve("db.internal"))
                simulation.run(for: .milliseconds(10))
                return lookup
            }
            return lookups
        }
        var lookups: [EventRecorder<[SocketAddress]>] = []
        var injected: [SimulationFault] = []
        let seededHash = Simulation.check(seed: 75) { seeded in
            lookups = try run(seeded)
            let failed = lookups.filter { ($0.terminal?.error as? UVError)?.code == UVError.nameTemporaryFailure.code }.count
            XCTAssertGreaterThan(failed, 0, "seed 75 draws failures")
            XCTAssertLessThan(failed, 8, "and successes")
            injected = seeded.injectedFaults
            XCTAssertEqual(injected.count, failed)
        }
        let replayHash = Simulation.check(seed: 75, faultPlan: injected) { replay in
            let replayed = try run(replay)
            XCTAssertEqual(replayed.map { $0.terminal?.error as? UVError }, lookups.map { $0.terminal?.error as? UVError })
        }
        XCTAssertEqual(replayHash, seededHash)
    }

    func testBadHostsAndDNSFaultsAreRefusedByName() throws {
        Simulation.check(seed: 76) { simulation in
            for (name, addresses, expected) in [("", ["10.0.0.1"], "the name is empty"), ("10.0.0.1", ["10.0.0.2"], "is a numeric address"),
                                                ("db", [], "needs at least one address"), ("db", ["db2"], "is not a numeric")] {
                XCTAssertThrowsError(try simulation.addHost(name, addresses: addresses)) { error in
                    XCTAssertTrue("\(error)".contains(expected), "\(error)")
                }
            }
            XCTAssertThrowsError(try simulation.inject(.dnsFailure(host: "", at: .zero, for: .zero))) { error in
                XCTAssertTrue("\(error)".contains("needs a host name"), "\(error)")
            }
            XCTAssertThrowsError(try simulation.inject(.dnsFailure(host: "db", at: .zero, for: .milliseconds(-1)))) { error in
                XCTAssertTrue("\(error)".contains("duration must not be negative"), "\(error)")
            }
            XCTAssertThrowsError(try simulation.setNetworkFaults(SimulationNetworkFaults(dnsFailurePerMille: 1_001))) { error in
                XCTAssertTrue("\(error)".contains("dnsFailurePerMille must be in 0...1000"), "\(error)")
            }
            XCTAssertEqual("\(SimulationFault.dnsFailure(host: "db", at: .seconds(1), for: .milliseconds(5)))",
                           ".dnsFailure(host: \"db\", at: .seconds(1), for: .milliseconds(5))")
        }
    }
}

import EchoServerKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `TCP.connect` and `TCPServer` (the echo sample's own server) on a simulation's network:
/// virtual time, one trace per seed, latency and resets drawn from it.
final class SimulatedTCPTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    private func payload(_ count: Int, _ salt: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ salt) }
    }

    /// A client that sends `bytes`, half-closes, and collects what comes back until the server closes.
    private func client(sending bytes: [UInt8], port: Int = 7000) -> Signal<[UInt8]> {
        TCP.connect(host: "127.0.0.1", port: port).flatMap { connection in
            connection.send(bytes)
            connection.shutdown()
            return connection.bytes
        }
    }

    private struct Outcome {
        let server: EventRecorder<EchoEvent>
        let clients: [EventRecorder<[UInt8]>]
        let payloads: [[UInt8]]
    }

    /// The echo server on loop "server", `count` clients on the simulation's loop.
    private func echo(_ simulation: Simulation, clients count: Int, sizes: [Int] = [10, 100_000, 3_000]) throws -> Outcome {
        let server = simulation.makeLoop(name: "server")
        let events = try simulation.record(EchoServer.run(port: 7000), on: server)
        let payloads = (0..<count).map { payload(sizes[$0 % sizes.count], $0) }
        let clients = try payloads.map { try simulation.record(client(sending: $0)) }
        return Outcome(server: events, clients: clients, payloads: payloads)
    }

    func testTheEchoSampleServesClientsOnVirtualTimeWithOneTracePerSeed() throws {
        Simulation.check(seed: 51) { simulation in
            let run = try echo(simulation, clients: 3)
            simulation.runUntilIdle()
            for (index, recorder) in run.clients.enumerated() {
                XCTAssertEqual(Array(recorder.values.joined()), run.payloads[index], "client \(index) got its bytes back")
                guard case .completed? = recorder.terminal else { return XCTFail("client \(index): \(String(describing: recorder.terminal))") }
            }
            // Connect: SYN 1 ms, answer 1 ms; the echo of 10 bytes is back 2 ms after it was sent.
            XCTAssertEqual(run.clients[0].recorded.first?.time, ms(4))
            let events = run.server.values
            guard case .listening(let address)? = events.first else { return XCTFail("\(events)") }
            XCTAssertEqual(address.description, "127.0.0.1:7000")
            let left = events.compactMap { event -> Int? in
                if case .disconnected(_, let bytes, nil, _) = event { return bytes }
                return nil
            }
            XCTAssertEqual(left.sorted(), run.payloads.map(\.count).sorted(), "each client left cleanly after its echo")
            let peers = events.compactMap { event -> Int? in
                if case .connected(let peer?, _) = event { return peer.port }
                return nil
            }
            XCTAssertEqual(Set(peers).count, 3, "each client has a port of its own")
            XCTAssertTrue(peers.allSatisfy { $0 >= 49_152 })
        }
    }

    func testConnectingWhereNothingListensIsRefusedAfterARoundTrip() throws {
        Simulation.check(seed: 52) { simulation in
            let refused = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7001))
            simulation.runUntilIdle()
            XCTAssertEqual((refused.terminal?.error as? UVError)?.code, UVError.connectionRefusedCode)
            XCTAssertEqual(refused.recorded.map(\.time), [ms(2)])
        }
    }

    func testASecondServerOnTheSamePortFailsWithEADDRINUSEAndPortZeroPicksOne() throws {
        Simulation.check(seed: 53) { simulation in
            let first = try simulation.record(TCPServer.serve(port: 7000))
            let second = try simulation.record(TCPServer.serve(port: 7000))
            let any = try simulation.record(TCPServer.serve(port: 0))
            simulation.runUntilIdle()
            guard case .listening? = first.values.first else { return XCTFail("\(first.recorded)") }
            XCTAssertEqual((second.terminal?.error as? UVError)?.code, UVError.addressInUseCode)
            guard case .listening(let picked)? = any.values.first else { return XCTFail("\(any.recorded)") }
            XCTAssertGreaterThanOrEqual(picked.port, 32_768)
        }
    }

    func testAnUnknownHostNameFailsWithEAI_NONAMEAsARealLookupDoes() throws {
        Simulation.check(seed: 54) { simulation in
            let named = try simulation.record(TCP.connect(host: "example.invalid", port: 80))
            simulation.runUntilIdle()
            let error = named.terminal?.error as? UVError
            XCTAssertEqual(error?.code, UVError.nameNotFound.code)
            XCTAssertEqual(error?.context, "resolving 'example.invalid'")
            XCTAssertEqual(named.recorded.map(\.time), [ms(2)], "the lookup takes a round trip")
        }
    }

    func testTheEchoSampleDrainsOnVirtualTimeServingTheClientInTransferAndResettingTheOneLeftOpen() throws {
        Simulation.check(seed: 55) { simulation in
            let server = simulation.makeLoop(name: "server")
            let drain = Signal<Int>.interval(.milliseconds(10)).take(1).map { _ in
                TCPServer.DrainRequest.graceful(timeout: .milliseconds(50))
            }
            let events = try simulation.record(EchoServer.run(port: 7000, drain: drain), on: server)
            // The first client is still sending when the drain comes: it half-closes at 30 ms.
            let finishing = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([1, 2, 3])
                _ = connection.loop.schedule(after: .milliseconds(30)) {
                    connection.send([4, 5])
                    connection.shutdown()
                }
                return connection.bytes
            })
            // The second never closes: the deadline resets it.
            let lingering = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([9])
                return connection.bytes
            })
            simulation.run(for: .milliseconds(20))
            let late = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000))
            simulation.runUntilIdle()

            XCTAssertEqual(Array(finishing.values.joined()), [1, 2, 3, 4, 5], "served to the end during the drain")
            guard case .completed? = finishing.terminal else { return XCTFail("\(finishing.recorded)") }
            XCTAssertEqual(lingering.values, [[9]])
            XCTAssertEqual((lingering.terminal?.error as? UVError)?.name, "ECONNRESET")
            XCTAssertEqual(lingering.recorded.last?.time, ms(61), "reset at the 60 ms deadline, 1 ms away")
            XCTAssertEqual((late.terminal?.error as? UVError)?.code, UVError.connectionRefusedCode, "no accepting while draining")
            let draining = events.recorded.filter { if case .next(.draining(let open)) = $0.event { open == 2 } else { false } }
            XCTAssertEqual(draining.map(\.time), [ms(10)])
            guard case .completed? = events.terminal else { return XCTFail("\(events.recorded)") }
            XCTAssertEqual(events.recorded.last?.time, ms(60))
        }
    }

    func testFaultsOutsideTheirRangeAreRefusedAndLeftAsTheyWere() throws {
        Simulation.check(seed: 56) { simulation in
            let bad = [SimulationNetworkFaults(latency: .milliseconds(-1)), SimulationNetworkFaults(jitter: .seconds(-1)),
                       SimulationNetworkFaults(resetPerMille: 1_001), SimulationNetworkFaults(resetWithin: .seconds(-2))]
            let named = ["latency", "jitter", "resetPerMille", "resetWithin"]
            for (faults, field) in zip(bad, named) {
                XCTAssertThrowsError(try simulation.setNetworkFaults(faults)) { error in
                    XCTAssertTrue("\(error)".contains("setNetworkFaults: \(field) must"), "\(error)")
                }
            }
            XCTAssertEqual(simulation.networkFaults, SimulationNetworkFaults())
            try simulation.setNetworkFaults(SimulationNetworkFaults(latency: .milliseconds(3)))
            XCTAssertEqual(simulation.networkFaults.latency, .milliseconds(3))
        }
    }

    func testAnIdleClientIsClosedAfterTheIdleTimeoutOfVirtualTime() throws {
        Simulation.check(seed: 57) { simulation in
            let server = simulation.makeLoop(name: "server")
            var options = TCPOptions()
            options.idleTimeout = .milliseconds(100)
            let events = try simulation.record(EchoServer.run(port: 7000, options: options), on: server)
            let quiet = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([1])
                return connection.bytes
            })
            simulation.run(for: .milliseconds(300))
            XCTAssertEqual(quiet.values, [[1]])
            guard case .completed? = quiet.terminal else { return XCTFail("\(quiet.recorded)") }
            // Last byte at 4 ms (its echo read), idle from then; checks every 25 ms: closed at 125 ms, FIN read at 126 ms.
            XCTAssertEqual(quiet.recorded.last?.time, ms(126))
            let timedOut = events.values.contains { event in
                if case .disconnected(_, _, let error?, _) = event { return (error as? UVError)?.code == UVError.timedOutCode }
                return false
            }
            XCTAssertTrue(timedOut, "\(events.values)")
        }
    }

    func testTheTraceDigestsWhatEachReadCarried() throws {
        func run(_ bytes: [UInt8]) -> SimulationTrace {
            var trace = SimulationTrace()
            Simulation.check(seed: 58) { simulation in
                _ = try simulation.record(TCPServer.listen(port: 7000).map { connection in
                    _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                    return 0
                })
                _ = try simulation.record(client(sending: bytes))
                simulation.runUntilIdle()
                trace = simulation.trace
            }
            return trace
        }
        let first = run([1, 2, 3])
        let same = run([1, 2, 3])
        let other = run([1, 2, 4])
        XCTAssertEqual(first.hash, same.hash)
        XCTAssertNotEqual(first.hash, other.hash, "the same callbacks at the same times, other bytes: another hash")
        XCTAssertEqual(first.entries.map(\.time), other.entries.map(\.time))
        XCTAssertEqual(first.entries.map(\.kind), other.entries.map(\.kind))
        let difference = Simulation.firstDifference(first.entries, other.entries)
        XCTAssertTrue(difference.contains(" read "), difference)
    }

    func testAPartitionHoldsTheCutOffHostsPacketsUntilItHealsAndSparesTheOthers() throws {
        Simulation.check(seed: 59) { simulation in
            let server = simulation.makeLoop(name: "server")
            let other = simulation.makeLoop(name: "other")
            _ = try simulation.record(EchoServer.run(port: 7000), on: server)
            let near = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000))
            let far = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000), on: other)
            simulation.run(for: .milliseconds(10))
            guard let nearConnection = near.values.first, let farConnection = far.values.first else {
                return XCTFail("not connected: \(near.recorded) \(far.recorded)")
            }
            try simulation.partition(simulation.loop, server, for: .milliseconds(50))
            let nearEcho = try simulation.record(nearConnection.bytes)
            let farEcho = try simulation.record(farConnection.bytes, on: other)
            try simulation.perform { nearConnection.send([7]) }
            try simulation.perform(on: other) { farConnection.send([8]) }
            simulation.run(for: .milliseconds(100))
            XCTAssertEqual(nearEcho.values, [[7]])
            XCTAssertEqual(nearEcho.recorded.first?.time, ms(62), "held until the heal at 60 ms, then 1 ms each way")
            XCTAssertEqual(farEcho.values, [[8]])
            XCTAssertEqual(farEcho.recorded.first?.time, ms(12), "another host is not cut off")
            try simulation.perform { _ = nearConnection.close() }
            try simulation.perform(on: other) { _ = farConnection.close() }
            simulation.runUntilIdle()
        }
    }

    func testAPartitionOfALoopNotOfTheSimulationOrWithItselfIsRefused() throws {
        let stranger = Simulation(seed: 60)
        Simulation.check(seed: 60) { simulation in
            XCTAssertThrowsError(try simulation.partition(simulation.loop, stranger.loop, for: .seconds(1))) { error in
                XCTAssertTrue("\(error)".contains("both loops must be this simulation's"), "\(error)")
            }
            XCTAssertThrowsError(try simulation.partition(simulation.loop, simulation.loop, for: .seconds(1))) { error in
                XCTAssertTrue("\(error)".contains("cannot be cut off from itself"), "\(error)")
            }
            let other = simulation.makeLoop(name: "other")
            XCTAssertThrowsError(try simulation.partition(simulation.loop, other, for: .seconds(-1))) { error in
                XCTAssertTrue("\(error)".contains("must not be negative"), "\(error)")
            }
        }
        XCTAssertTrue(stranger.finish().isClean)
    }

    func testShortReadsHandTheBytesInDrawnPiecesAndTheEchoIsWhole() throws {
        Simulation.check(seed: 61) { simulation in
            try simulation.setNetworkFaults(SimulationNetworkFaults(shortReadPerMille: 1_000))
            let run = try echo(simulation, clients: 1, sizes: [1_000])
            simulation.runUntilIdle()
            XCTAssertEqual(Array(run.clients[0].values.joined()), run.payloads[0])
            XCTAssertGreaterThan(run.clients[0].values.count, 1, "the echo came back in pieces")
            XCTAssertTrue(run.clients[0].values.allSatisfy { $0.count < 1_000 })
        }
    }

    func testTheEchoSampleServesOnASimulatedGroupEachClientOnTheShareDrawnForIt() throws {
        Simulation.check(seed: 62) { simulation in
            let group = simulation.makeGroup(loopCount: 3, name: "serve")
            let events = try simulation.record(EchoServer.run(port: 7000, on: group), on: group.loops[0])
            let payloads = (0..<6).map { payload(500 + $0, $0) }
            let clients = try payloads.map { try simulation.record(client(sending: $0)) }
            simulation.runUntilIdle()
            for (index, recorder) in clients.enumerated() {
                XCTAssertEqual(Array(recorder.values.joined()), payloads[index], "client \(index)")
                guard case .completed? = recorder.terminal else { return XCTFail("client \(index): \(recorder.recorded)") }
            }
            guard case .listening(let address)? = events.values.first else { return XCTFail("\(events.values)") }
            XCTAssertEqual(address.port, 7000)
            let servedOn = events.values.compactMap { event -> String? in
                if case .served(_, let loop) = event { return loop }
                return nil
            }
            XCTAssertEqual(servedOn.count, 6)
            XCTAssertTrue(Set(servedOn).isSubset(of: ["serve-0", "serve-1", "serve-2"]))
            XCTAssertGreaterThan(Set(servedOn).count, 1, "the clients are spread over the shares")
        }
    }

    /// Every client gets back exactly what it sent, or a reported error; the run's hash.
    private func chaos(seed: UInt64) -> (hash: UInt64, resets: Int, failed: Int) {
        var resets = 0
        var failed = 0
        let hash = Simulation.check(seed: seed) { simulation in
            try simulation.setNetworkFaults(SimulationNetworkFaults(
                jitter: .milliseconds(20), resetPerMille: 400, resetWithin: .milliseconds(30)))
            let run = try echo(simulation, clients: 8)
            simulation.runUntilIdle()
            failed = 0
            for (index, recorder) in run.clients.enumerated() {
                switch recorder.terminal {
                case .completed?:
                    XCTAssertEqual(Array(recorder.values.joined()), run.payloads[index], "seed \(seed) client \(index)")
                case .error(let error)?:
                    XCTAssertEqual((error as? UVError)?.name, "ECONNRESET", "seed \(seed) client \(index)")
                    XCTAssertTrue(run.payloads[index].starts(with: Array(recorder.values.joined())),
                                  "what came back before the reset is a prefix of what was sent")
                    failed += 1
                default:
                    XCTFail("seed \(seed) client \(index) did not end: \(recorder.recorded.count) events")
                }
            }
            resets = simulation.networkResetsInjected
        }
        return (hash, resets, failed)
    }

    func testResetsDrawnFromTheSeedEndSomeClientsWithAnErrorAndTheRunReplays() {
        var hashes: Set<UInt64> = []
        var anyFailed = false
        for seed: UInt64 in 60...63 {
            let (hash, resets, failed) = chaos(seed: seed)
            hashes.insert(hash)
            XCTAssertLessThanOrEqual(failed, resets, "no client fails without an injected reset")
            anyFailed = anyFailed || failed > 0
        }
        XCTAssertTrue(anyFailed, "some seed resets a client mid-echo")
        XCTAssertEqual(hashes.count, 4, "each seed its own run")
    }
}

/// What `finish()` finds when a test leaves connections open.
final class SimulatedTCPFinishTests: XCTestCase {
    func testFinishingWithConnectionsOpenLetsTheirLastPacketsLandAndLeavesNothingOpen() throws {
        // Left open on purpose: check's finish() must find nothing open after the last packets land.
        Simulation.check(seed: 70) { simulation in
            let server = simulation.makeLoop(name: "server")
            _ = try simulation.record(EchoServer.run(port: 7000), on: server)
            let connected = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                connection.send([1, 2])
                return connection.bytes
            })
            simulation.run(for: .milliseconds(10))
            XCTAssertEqual(connected.values, [[1, 2]])
        }
    }
}

/// A task on a simulated loop using the async forms over the simulated network.
final class SimulatedTCPTaskTests: XCTestCase {
    func testALoopTaskConnectsSleepsOnTheSimulationClockAndReadsItsEchoDeterministically() throws {
        Simulation.check(seed: 71) { simulation in
            let server = simulation.makeLoop(name: "server")
            _ = try simulation.record(EchoServer.run(port: 7000), on: server)
            let clock = simulation.clock
            let outcome = Locked<String>("")
            try simulation.perform {
                simulation.loop.task { _ in
                    let echoed = try await TCP.withConnection(host: "127.0.0.1", port: 7000) { connection in
                        try await Task.sleep(for: .milliseconds(20), clock: clock)
                        connection.send(Array("ping".utf8))
                        connection.shutdown()
                        var received: [UInt8] = []
                        for try await chunk in connection.bytes.values { received += chunk }
                        return String(decoding: received, as: UTF8.self)
                    }
                    outcome.withLock { $0 = "\(echoed) at \(clock.now)" }
                }
            }
            simulation.runUntilIdle()
            // Connected at 2 ms, sent at 22 ms, echoed back and the server's FIN read at 24 ms.
            XCTAssertEqual(outcome.current, "ping at 0.024 seconds")
        }
    }
}

import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// An echo soak at full speed: a few connections ping-pong (one message in flight
/// each) against the echo sample's server for `SOAK_SECONDS` (default 10 here;
/// `scripts/soak` runs 60; `STRESS_SCALE` scales it and the warm-up, to at least a second each),
/// every byte checked, and resident memory must stay flat.
///
/// Resident memory is read from `/proc/self/statm` after a 3-second warm-up and
/// again at the end, while the clients are still at full speed. The bound is
/// 8 MiB: what glibc's arenas may still take for fragmentation once warm, and far
/// below what a leak on the per-message path would cost (one 32-byte block per
/// round trip is 8 MiB after 260,000 round trips, a few seconds at full speed).
/// The live heap (mallinfo2) is checked too, to 2 MiB, since it sees a leak that
/// resident memory can hide in pages already touched.
final class EchoSoakStressTests: XCTestCase {
    func testEchoSoakAtFullSpeedKeepsResidentMemoryFlat() throws {
        let duration = Duration.seconds(environmentInt("SOAK_SECONDS", default: scaled(10)))
        let connections = environmentInt("SOAK_CONNECTIONS", default: 4)
        let warmUp = Duration.seconds(scaled(3))
        let report = LoopHarness.run(timeout: .seconds(30)) { harness in
            let server = try harness.record(EchoServer.run(port: 0), label: "echo server")
            guard case .listening(let address)? = try server.waitForValues(1).first else {
                throw StressFailure("the server's first event was not .listening: \(server.events)")
            }
            let clientLoop = EventLoop(name: "soak-clients")
            defer { clientLoop.shutdown() }
            let tally = FleetTally()
            let fleet = ClientFleet(loop: clientLoop,
                                    clients: (0..<connections).map {
                                        VerifyingEchoClient(index: $0, loop: clientLoop, messages: .max, window: 1, tally: tally)
                                    },
                                    maxConnecting: connections)
            fleet.startConnecting(port: address.port)
            try waitFor("\(connections) clients to connect", timeout: .seconds(30), observed: tally.summary) {
                tally.connected.load(ordering: .relaxed) == connections || !tally.failures.current.isEmpty
            }
            fleet.go()

            // The soak runs for a set time: these waits end at a deadline by design, and stop early on a failure.
            let failed = { !tally.failures.current.isEmpty || tally.finished.load(ordering: .relaxed) > 0 }
            _ = try? waitFor("the warm-up to end", timeout: warmUp, failed)
            let startRSS = try residentBytes(), startHeap = liveHeapBytes()
            let startTrips = tally.roundTrips.load(ordering: .relaxed)
            let started = SchedulerInstant.now
            var peakRSS = startRSS
            while SchedulerInstant.now - started < duration && !failed() {
                _ = try? waitFor("a second of soak", timeout: .seconds(1), failed)
                peakRSS = max(peakRSS, try residentBytes())
            }
            let endRSS = try residentBytes(), endHeap = liveHeapBytes()
            let trips = tally.roundTrips.load(ordering: .relaxed) - startTrips
            let elapsed = SchedulerInstant.now - started

            tally.stopRequested.store(true, ordering: .relaxed)
            try waitFor("the clients to finish their last round trip and close", timeout: .seconds(30), observed: tally.summary) {
                tally.finished.load(ordering: .relaxed) == connections
            }
            XCTAssertEqual(tally.failures.current, [], "clients lost, reordered or corrupted bytes")
            XCTAssertGreaterThanOrEqual(elapsed, duration, "the soak stopped early")
            XCTAssertGreaterThan(trips, 0)
            XCTAssertLessThan(endRSS - startRSS, 8 << 20,
                              "resident memory grew from \(mebibytes(startRSS)) to \(mebibytes(endRSS)) over \(trips) round trips")
            XCTAssertLessThan(endHeap - startHeap, 2 << 20,
                              "the live heap grew from \(mebibytes(startHeap)) to \(mebibytes(endHeap)) over \(trips) round trips")
            let closed = try shutDown(clientLoop)
            XCTAssertEqual(closed.closedHandles, [], "handles still open on the client loop after every client finished")
            try harness.wait(for: "every server-side connection closed", timeout: .seconds(30)) {
                (try? harness.loop.openHandles().count) == 1  // the listener
            }
            print("soak: \(connections) connections ping-ponging for \(formatted(elapsed)) after a \(formatted(warmUp)) warm-up: "
                  + "\(trips) round trips (\(Int(Double(trips) / seconds(elapsed)))/s), "
                  + "\(tally.bytesChecked.load(ordering: .relaxed)) bytes checked; RSS start \(mebibytes(startRSS)), "
                  + "end \(mebibytes(endRSS)), peak \(mebibytes(peakRSS)); live heap start \(mebibytes(startHeap)), "
                  + "end \(mebibytes(endHeap))")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

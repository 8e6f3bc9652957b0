import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// The trace keeps compact records: its entries read back each callback's loop (name and
/// index), kind, time and payload as they were appended, whichever loop was seen first (payloads:
/// `SimulatedTCPTests.testTheTraceDigestsWhatEachReadCarried`).
final class SimulationTraceTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testEntriesReadBackEachLoopsNameIndexTimeAndKindWhenALaterLoopRunsFirst() throws {
        Simulation.check(seed: 61) { simulation in
            let second = simulation.makeLoop(name: "second")
            let third = simulation.makeLoop(name: "third")
            // The third loop is traced first, the first loop last.
            try simulation.perform(on: third) { third.schedule(after: .milliseconds(2)) {} }
            try simulation.perform(on: second) { second.execute {} }
            try simulation.perform { simulation.loop.schedule(after: .milliseconds(5)) {} }
            simulation.runUntilIdle()
            let entries = simulation.trace.entries
            XCTAssertEqual(simulation.trace.count, entries.count)
            XCTAssertEqual(entries.map(\.loopName), ["third", "second", "sim", "second", "third", "sim"])
            XCTAssertEqual(entries.map(\.loopIndex), [2, 1, 0, 1, 2, 0])
            XCTAssertEqual(entries.map(\.kind), [.perform, .perform, .perform, .queuedWork, .timer, .timer])
            XCTAssertEqual(entries.map(\.time), [ms(0), ms(0), ms(0), ms(0), ms(2), ms(5)])
            XCTAssertTrue(entries.allSatisfy { $0.payload == nil }, "nothing was read")
        }
    }
}

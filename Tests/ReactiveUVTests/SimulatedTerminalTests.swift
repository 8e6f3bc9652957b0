import Glibc
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `TTY` on a simulation: a terminal attached to the simulated process, resized at virtual times.
final class SimulatedTerminalTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    func testAProgramSeesItsTerminalItsResizesAndItsRawMode() throws {
        Simulation.check(seed: 241) { simulation in
            simulation.attachTerminal(size: WindowSize(columns: 80, rows: 24))
            let resizes = try simulation.record(TTY.resizes())
            try simulation.perform {
                XCTAssertEqual((0...3).map { TTY.isTerminal($0) }, [true, true, true, false])
                XCTAssertEqual(try TTY.windowSize(), WindowSize(columns: 80, rows: 24))
                try TTY.setMode(.raw)
            }
            XCTAssertEqual(simulation.terminalMode, .raw)
            try simulation.resizeTerminal(to: WindowSize(columns: 120, rows: 40), at: .milliseconds(30))
            try simulation.resizeTerminal(to: WindowSize(columns: 100, rows: 30), at: .milliseconds(70))
            simulation.runUntilIdle()
            XCTAssertEqual(resizes.values, [WindowSize(columns: 120, rows: 40), WindowSize(columns: 100, rows: 30)])
            XCTAssertEqual(resizes.recorded.map(\.time), [ms(30), ms(70)])
            XCTAssertEqual(simulation.terminalSize, WindowSize(columns: 100, rows: 30))
            try simulation.perform { try TTY.setMode(.normal) }
            XCTAssertEqual(simulation.terminalMode, .normal)
        }
        // Off the simulation's callbacks, TTY is the real process's again.
        XCTAssertEqual(TTY.isTerminal(0), isatty(0) == 1)
    }

    func testWithoutATerminalTTYFailsAsUnderPipesAndBadResizesAreRefused() throws {
        Simulation.check(seed: 242) { simulation in
            XCTAssertNil(simulation.terminalMode)
            XCTAssertThrowsError(try simulation.resizeTerminal(to: WindowSize(columns: 80, rows: 24), at: .zero)) { error in
                XCTAssertTrue("\(error)".contains("no terminal"), "\(error)")
            }
            try simulation.perform {
                XCTAssertFalse(TTY.isTerminal(0))
                XCTAssertThrowsError(try TTY.windowSize()) { XCTAssertEqual(($0 as? UVError)?.code, -ENOTTY, "\($0)") }
                XCTAssertThrowsError(try TTY.setMode(.raw)) { XCTAssertEqual(($0 as? UVError)?.code, -ENOTTY, "\($0)") }
            }
            simulation.attachTerminal()
            try simulation.perform {
                XCTAssertThrowsError(try TTY.windowSize(of: 7)) { XCTAssertEqual(($0 as? UVError)?.code, -EBADF, "\($0)") }
                try TTY.setMode(.raw, of: 0)
                XCTAssertThrowsError(try TTY.setMode(.raw, of: 1)) { XCTAssertEqual(($0 as? UVError)?.code, -EBUSY, "\($0)") }
            }
            XCTAssertEqual(simulation.terminalMode, .raw)
            XCTAssertThrowsError(try simulation.resizeTerminal(to: WindowSize(columns: 0, rows: 5), at: .zero))
            XCTAssertThrowsError(try simulation.resizeTerminal(to: WindowSize(columns: 80, rows: 24), at: .milliseconds(-1)))
            XCTAssertEqual(simulation.terminalSize, WindowSize(columns: 80, rows: 24))
        }
    }
}

import CTestSupport
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A pseudo-terminal pair: the test plays the terminal on the master side; the slave is the program's terminal.
final class PseudoTerminal {
    let master: Int32
    let slave: Int32
    let slavePath: String

    init() throws {
        var master: Int32 = -1, slave: Int32 = -1
        var path = [CChar](repeating: 0, count: 256)
        guard ruv_test_open_pty(&master, &slave, &path, path.count) == 0 else {
            throw TestFailure("no pseudo-terminal: errno \(errno)")
        }
        self.master = master
        self.slave = slave
        slavePath = String(decoding: path.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit {
        close(slave)
        close(master)
    }

    /// The slave's settings as the kernel has them now.
    func settings() -> termios {
        var settings = termios()
        XCTAssertEqual(tcgetattr(slave, &settings), 0)
        return settings
    }

    var isCanonical: Bool { settings().c_lflag & tcflag_t(ICANON) != 0 }
    var echoes: Bool { settings().c_lflag & tcflag_t(ECHO) != 0 }

    /// Sets the size the terminal reports (what a terminal emulator does when its window is resized).
    func resize(columns: Int, rows: Int) {
        var size = winsize(ws_row: UInt16(rows), ws_col: UInt16(columns), ws_xpixel: 0, ws_ypixel: 0)
        XCTAssertEqual(ioctl(master, UInt(TIOCSWINSZ), &size), 0)
    }

    /// Types `text` on the terminal's keyboard.
    func type(_ text: String) {
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }, bytes.count)
    }

    /// What the program wrote to the terminal so far (reads what is there without waiting).
    func readAvailable() -> String {
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
        while poll(&poller, 1, 0) > 0, poller.revents & Int16(POLLIN) != 0 {
            let count = buffer.withUnsafeMutableBytes { read(master, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            collected += buffer[..<count]
        }
        return String(decoding: collected, as: UTF8.self)
    }
}

final class TTYTests: XCTestCase {
    private func checked(_ body: (LoopHarness) throws -> Void) {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// Raw mode switches off line editing and echo; normal mode puts back exactly what was there.
    func testRawModeIsSetAndNormalModeRestoresTheSavedSettings() throws {
        let terminal = try PseudoTerminal()
        XCTAssertTrue(TTY.isTerminal(terminal.slave))
        let before = terminal.settings()
        XCTAssertTrue(terminal.isCanonical && terminal.echoes, "a new pseudo-terminal starts in normal mode")
        try TTY.setMode(.raw, of: terminal.slave)
        XCTAssertFalse(terminal.isCanonical)
        XCTAssertFalse(terminal.echoes)
        XCTAssertEqual(terminal.settings().c_lflag & tcflag_t(ISIG), 0, "Ctrl-C is a byte in raw mode")
        try TTY.setMode(.raw, of: terminal.slave)  // again: harmless, and the saved settings stay the first ones
        try TTY.setMode(.normal, of: terminal.slave)
        let after = terminal.settings()
        XCTAssertEqual(after.c_lflag, before.c_lflag)
        XCTAssertEqual(after.c_iflag, before.c_iflag)
        XCTAssertEqual(after.c_oflag, before.c_oflag)
    }

    /// `resetMode()` (the crash-handler path) restores the saved settings while raw.
    func testResetModeRestoresTheTerminal() throws {
        let terminal = try PseudoTerminal()
        try TTY.setMode(.raw, of: terminal.slave)
        XCTAssertFalse(terminal.isCanonical)
        TTY.resetMode()
        XCTAssertTrue(terminal.isCanonical && terminal.echoes)
        try TTY.setMode(.normal, of: terminal.slave)  // forgets the saved settings for the next test
    }

    /// Mode changes on something that is not a terminal, or on a second terminal while one is raw, are errors.
    func testModeErrors() throws {
        let (readEnd, writeEnd): (Int32, Int32) = try {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw TestFailure("pipe") }
            return (ends[0], ends[1])
        }()
        defer {
            close(readEnd)
            close(writeEnd)
        }
        XCTAssertThrowsError(try TTY.setMode(.raw, of: readEnd)) { XCTAssertEqual(($0 as? UVError)?.name, "ENOTTY") }
        XCTAssertThrowsError(try TTY.windowSize(of: readEnd)) { XCTAssertEqual(($0 as? UVError)?.name, "ENOTTY") }
        let first = try PseudoTerminal(), second = try PseudoTerminal()
        try TTY.setMode(.raw, of: first.slave)
        XCTAssertThrowsError(try TTY.setMode(.raw, of: second.slave)) { XCTAssertEqual(($0 as? UVError)?.name, "EBUSY") }
        XCTAssertTrue(second.isCanonical, "the second terminal was left alone")
        try TTY.setMode(.normal, of: first.slave)
        XCTAssertTrue(first.isCanonical)
    }

    /// The window size is what the terminal reports, and a resize (SIGWINCH) sends the new size.
    func testWindowSizeAndResizes() throws {
        let terminal = try PseudoTerminal()
        terminal.resize(columns: 100, rows: 30)
        XCTAssertEqual(try TTY.windowSize(of: terminal.slave), WindowSize(columns: 100, rows: 30))
        checked { harness in
            let resizes = try! harness.record(TTY.resizes(of: terminal.slave), label: "resizes")
            try! harness.wait(for: "the SIGWINCH watch") { (try? harness.loop.openHandles().count) ?? 0 >= 1 }
            terminal.resize(columns: 132, rows: 43)
            // The kernel signals the terminal's foreground process group, which the test process is not in: signal it as the kernel would.
            XCTAssertEqual(kill(getpid(), SIGWINCH), 0)
            XCTAssertEqual(try! resizes.waitForValues(1).first, WindowSize(columns: 132, rows: 43))
            resizes.dispose()
        }
    }

    /// A terminal on the input side is read through a libuv TTY stream: a typed line arrives (canonical mode), Ctrl-D ends it.
    func testInputFromATerminalReadsTypedLinesAndEndsAtCtrlD() throws {
        let terminal = try PseudoTerminal()
        XCTAssertEqual(try StandardIO.kind(of: terminal.slave).get(), .terminal)
        let duplicate = dup(terminal.slave)  // libuv closes the descriptor it is given (above 2) with the handle
        checked { harness in
            let input = try! harness.record(StandardIO.input(descriptor: duplicate, name: "test terminal", on: nil), label: "input")
            try! harness.wait(for: "the tty handle") { (try? harness.loop.openHandles().count) ?? 0 >= 1 }
            terminal.type("hello\n")
            XCTAssertEqual(String(decoding: try! waitForBytes(input, 6), as: UTF8.self), "hello\n")
            terminal.type("\u{4}")  // Ctrl-D at the start of a line: end of input
            XCTAssertTrue(try! input.waitForTermination().isCompleted)
        }
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A raw terminal is restored when SIGTERM kills the process, also after a `unixSignals` watch of
/// SIGTERM has ended (libuv puts the default action back when its last watch of a signal stops).
///
/// The process that dies is a child: this test binary run again on one test, with
/// `probeVariable` naming the order and the pseudo-terminal's slave. The test process plays
/// the terminal (it holds the master and a slave descriptor, whose settings are the terminal's).
final class TTYSignalRestoreTests: XCTestCase {
    private static let probeVariable = "RUV_TTY_SIGNAL_PROBE"
    private static let readyLine = "tty-probe-ready"

    /// Raw mode first, then a watch of SIGTERM that ends: SIGTERM still restores the terminal.
    func testSIGTERMRestoresTheTerminalAfterAWatchOfItEnded() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try runProbe(probe) }
        try checkRestoredAfterSIGTERM(order: "raw-then-watch", test: "testSIGTERMRestoresTheTerminalAfterAWatchOfItEnded")
    }

    /// A watch of SIGTERM first (so raw mode found the signal taken), then raw mode, then the watch
    /// ends: SIGTERM still restores the terminal.
    func testSIGTERMRestoresTheTerminalWhenTheWatchCameBeforeRawMode() throws {
        if let probe = ProcessInfo.processInfo.environment[Self.probeVariable] { return try runProbe(probe) }
        try checkRestoredAfterSIGTERM(order: "watch-then-raw", test: "testSIGTERMRestoresTheTerminalWhenTheWatchCameBeforeRawMode")
    }

    /// Starts the child on a new pseudo-terminal, waits for it to be raw and ready, sends SIGTERM,
    /// and checks that it died of it with the terminal back in its first settings.
    private func checkRestoredAfterSIGTERM(order: String, test: String) throws {
        let terminal = try PseudoTerminal()
        let before = terminal.settings()
        XCTAssertTrue(terminal.isCanonical && terminal.echoes, "a new pseudo-terminal starts in normal mode")
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = ["ReactiveUVTests.TTYSignalRestoreTests/\(test)"]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.probeVariable] = "\(order):\(terminal.slavePath)"
        environment["SWIFT_BACKTRACE"] = "enable=no"
        child.environment = environment
        let output = Pipe()
        child.standardOutput = output
        child.standardError = output
        try child.run()
        // Blocking reads until the child says it is ready, or its output ends (it died first).
        var text = ""
        while !text.contains(Self.readyLine) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard text.contains(Self.readyLine) else {
            child.waitUntilExit()
            return XCTFail("the child ended before it was ready: \(text)")
        }
        XCTAssertFalse(terminal.isCanonical, "the child did not make the terminal raw: nothing to restore")
        XCTAssertFalse(terminal.echoes)
        XCTAssertEqual(kill(child.processIdentifier, SIGTERM), 0)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationReason, .uncaughtSignal, text)
        XCTAssertEqual(child.terminationStatus, SIGTERM, "the child did not die of SIGTERM: \(text)")
        let after = terminal.settings()
        XCTAssertEqual(after.c_lflag, before.c_lflag, "the terminal was left raw")
        XCTAssertEqual(after.c_iflag, before.c_iflag)
        XCTAssertTrue(terminal.isCanonical && terminal.echoes)
    }

    /// The child's part: makes the terminal raw and starts and ends a watch of SIGTERM in `order`,
    /// says it is ready, and waits for SIGTERM (which ends the process: this never returns).
    private func runProbe(_ probe: String) throws {
        guard let colon = probe.firstIndex(of: ":") else { throw TestFailure("bad probe \(probe)") }
        let order = probe[..<colon], path = String(probe[probe.index(after: colon)...])
        let slave = open(path, O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw TestFailure("cannot open \(path): errno \(errno)") }
        var current = sigaction()
        XCTAssertEqual(sigaction(SIGTERM, nil, &current), 0)
        guard current.__sigaction_handler.sa_handler == nil else { throw TestFailure("SIGTERM's action is not the default here") }
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        sigaddset(&unblocked, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)

        let loop = EventLoop(name: "tty-probe")
        if order == "raw-then-watch" { try TTY.setMode(.raw, of: slave) }
        let watch = Signal<Int32>.unixSignals([SIGTERM], on: loop).subscribeNext { _ in }
        try waitFor("the SIGTERM watch", timeout: .seconds(60)) { (try? loop.openHandles().count) == 1 }
        if order == "watch-then-raw" { try TTY.setMode(.raw, of: slave) }
        watch.dispose()
        try waitFor("the watch to close", timeout: .seconds(60)) { (try? loop.openHandles()) == [] }
        let line = Self.readyLine + "\n"
        _ = line.withCString { write(1, $0, strlen($0)) }
        while true { pause() }
    }
}

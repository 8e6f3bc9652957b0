import CTestSupport
import Foundation
import ReactiveUV
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The `lines` sample run as a user would: standard input from a pipe, a file, nothing, a directory, a terminal.
final class LinesSampleTests: XCTestCase {
    func testNumbersTheLinesOfAPipeAndExitsZeroAtItsEnd() throws {
        let sample = try SampleProcess("lines", shell: #"printf 'a\nb\n' | "$0""#)
        XCTAssertEqual(sample.waitForExit(), 0)
        XCTAssertEqual(sample.standardOutput, "1: a\n2: b\n")
        XCTAssertEqual(sample.standardError, "")
    }

    /// A regular file on standard input (no pipe, no stream) behaves the same; a last line without a newline counts.
    func testReadsARegularFileOnStandardInput() throws {
        let path = NSTemporaryDirectory() + "lines-\(getpid()).txt"
        try Data("first\nsecond".utf8).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let sample = try SampleProcess("lines", [path], shell: #""$0" < "$1""#)
        XCTAssertEqual(sample.waitForExit(), 0)
        XCTAssertEqual(sample.standardOutput, "1: first\n2: second\n")
    }

    /// A file whose first chunk holds more lines than `values` buffers (1024): the file reads pause
    /// while the task catches up, instead of failing with a buffer overflow.
    func testALargeFileOnStandardInputIsReadWithFlowControl() throws {
        let path = NSTemporaryDirectory() + "lines-large-\(getpid()).txt"
        try Data((1...20_000).map { "\($0)\n" }.joined().utf8).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let sample = try SampleProcess("lines", [path], shell: #""$0" < "$1""#)
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        let lines = sample.standardOutput.split(separator: "\n")
        XCTAssertEqual(lines.count, 20_000)
        XCTAssertEqual(lines.last, "20000: 20000")
        XCTAssertEqual(sample.standardError, "")
    }

    /// Standard input closed (`<&-`): EBADF on the input signal, a message and status 1, not a crash.
    func testStandardInputClosedIsReportedAsEBADF() throws {
        let sample = try SampleProcess("lines", shell: #""$0" <&-"#)
        XCTAssertEqual(sample.waitForExit(), 1)
        XCTAssertTrue(sample.standardError.contains("cannot read standard input: EBADF"), sample.standardError)
        XCTAssertEqual(sample.standardOutput, "")
    }

    /// Standard input a directory (`< /`): EISDIR, status 1.
    func testStandardInputADirectoryIsReportedAsEISDIR() throws {
        let sample = try SampleProcess("lines", shell: #""$0" < /"#)
        XCTAssertEqual(sample.waitForExit(), 1)
        XCTAssertTrue(sample.standardError.contains("cannot read standard input: EISDIR"), sample.standardError)
    }

    /// Standard output closed (`>&-`): EBADF through the write, status 1.
    func testStandardOutputClosedIsReportedAsEBADF() throws {
        let sample = try SampleProcess("lines", shell: #"echo x | "$0" >&-"#)
        XCTAssertEqual(sample.waitForExit(), 1)
        XCTAssertTrue(sample.standardError.contains("cannot write standard output: EBADF"), sample.standardError)
    }

    /// A fast producer piped to `head -c 10`: head exits, the next write fails with EPIPE, and the
    /// producer stops with status 0 (not killed by SIGPIPE, status 141) after a note.
    func testAReaderThatGoesAwayStopsAFastProducerWithoutSIGPIPE() throws {
        let sample = try SampleProcess("lines", shell: #"{ "$0" --repeat y --stats; echo "lines exited $?" >&2; } | head -c 10"#)
        XCTAssertEqual(sample.waitForExit(), 0)
        XCTAssertEqual(sample.standardOutput, "1: y\n2: y\n")
        XCTAssertTrue(sample.standardError.contains("lines exited 0"), sample.standardError)
        XCTAssertTrue(sample.standardError.contains("standard output was closed by its reader"), sample.standardError)
    }

    /// A reader that waits before reading: the producer's queue stays bounded (it waits for its writes
    /// once 64 KiB are queued, or every 64 lines) instead of growing while the pipe is full.
    func testASlowReaderKeepsTheProducersQueueBounded() throws {
        // The reader sleeps so that the pipe fills while it does not read: that is the slow reader under test.
        let sample = try SampleProcess("lines", shell: #"{ "$0" --repeat y --stats; echo "lines exited $?" >&2; } | { sleep 1; head -c 20; }"#)
        XCTAssertEqual(sample.waitForExit(), 0)
        XCTAssertEqual(sample.standardOutput, "1: y\n2: y\n3: y\n4: y\n")
        XCTAssertTrue(sample.standardError.contains("lines exited 0"), sample.standardError)
        let queued = sample.standardError.split(separator: "\n")
            .first { $0.hasPrefix("lines: most output bytes queued: ") }
            .flatMap { Int($0.split(separator: " ").last!) }
        XCTAssertNotNil(queued, sample.standardError)
        XCTAssertLessThanOrEqual(queued ?? .max, 64 << 10 + 64 * 16, "the queue grew past the high-water mark plus one batch of lines")
    }

    /// On a terminal (standard input and output), a "> " prompt before each line; Ctrl-D ends with status 0.
    func testATerminalGetsAPromptAndCtrlDEnds() throws {
        var master: Int32 = -1, slave: Int32 = -1
        var path = [CChar](repeating: 0, count: 256)
        guard ruv_test_open_pty(&master, &slave, &path, path.count) == 0 else { throw TestFailure("no pseudo-terminal") }
        defer { close(master); close(slave) }
        let sample = try SampleProcess("lines", shell: #"exec "$0" > "$(tty)""#,
                                       standardInput: FileHandle(fileDescriptor: slave, closeOnDealloc: false))
        var screen = ""
        waitUntil("the first prompt") { readTerminal(master, into: &screen).hasSuffix("> ") }
        type("hello\n", on: master)
        waitUntil("the numbered line and the next prompt") { readTerminal(master, into: &screen).contains("1: hello\r\n> ") }
        type("\u{4}", on: master)  // Ctrl-D at the start of a line
        XCTAssertEqual(sample.waitForExit(), 0)
        XCTAssertEqual(sample.standardError, "")
    }

    /// On a terminal, `--raw` puts it in raw mode (keys come one at a time, no echo) and Ctrl-D puts it back.
    func testRawModeOnATerminalIsSetAndRestoredWhenTheSampleEnds() throws {
        var master: Int32 = -1, slave: Int32 = -1
        var path = [CChar](repeating: 0, count: 256)
        guard ruv_test_open_pty(&master, &slave, &path, path.count) == 0 else { throw TestFailure("no pseudo-terminal") }
        defer { close(master); close(slave) }
        let terminal = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        let sample = try SampleProcess("lines", shell: #"exec "$0" --raw > "$(tty)""#, standardInput: terminal)
        var screen = ""
        waitUntil("raw mode") { readTerminal(master, into: &screen).contains("raw mode") }
        XCTAssertFalse(isCanonical(slave), "raw mode: no line editing")
        type("k", on: master)
        waitUntil("the key printed") { readTerminal(master, into: &screen).contains("key 107") }
        type("\u{4}", on: master)  // Ctrl-D
        XCTAssertEqual(sample.waitForExit(), 0)
        XCTAssertTrue(isCanonical(slave), "normal mode is back")
    }

    /// Raw mode is undone by the exit hook (Ctrl-C exits at once, status 130) and by SIGTERM's handler.
    func testRawModeIsRestoredOnExitAndOnSIGTERM() throws {
        for ending in ["ctrl-c", "sigterm"] {
            var master: Int32 = -1, slave: Int32 = -1
            var path = [CChar](repeating: 0, count: 256)
            guard ruv_test_open_pty(&master, &slave, &path, path.count) == 0 else { throw TestFailure("no pseudo-terminal") }
            defer { close(master); close(slave) }
            var screen = ""
            let sample = try SampleProcess("lines", shell: #"exec "$0" --raw > "$(tty)""#,
                                           standardInput: FileHandle(fileDescriptor: slave, closeOnDealloc: false))
            waitUntil("raw mode (\(ending))") { readTerminal(master, into: &screen).contains("raw mode") }
            XCTAssertFalse(isCanonical(slave), ending)
            if ending == "ctrl-c" {
                type("\u{3}", on: master)
                XCTAssertEqual(sample.waitForExit(), 130)
            } else {
                sample.process.terminate()
                XCTAssertEqual(sample.waitForExit(), SIGTERM, "terminated by the signal, as before")
                XCTAssertEqual(sample.process.terminationReason, .uncaughtSignal)
            }
            XCTAssertTrue(isCanonical(slave), "normal mode is back after \(ending)")
        }
    }
}

private func isCanonical(_ descriptor: Int32) -> Bool {
    var settings = termios()
    guard tcgetattr(descriptor, &settings) == 0 else { return false }
    return settings.c_lflag & tcflag_t(ICANON) != 0 && settings.c_lflag & tcflag_t(ECHO) != 0
}

private func type(_ text: String, on master: Int32) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
}

/// Appends what the program wrote to the terminal since the last call to `screen` and returns it all.
private func readTerminal(_ master: Int32, into screen: inout String) -> String {
    var buffer = [UInt8](repeating: 0, count: 4096)
    var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
    while poll(&poller, 1, 0) > 0, poller.revents & Int16(POLLIN) != 0 {
        let count = buffer.withUnsafeMutableBytes { read(master, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        screen += String(decoding: buffer[..<count], as: UTF8.self)
    }
    return screen
}

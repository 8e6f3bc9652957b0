import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The `tail` sample run as a user would: the last lines, then `-F` across appends, rotation,
/// truncation and delete + re-create.
final class TailSampleTests: XCTestCase {
    private var directory = ""
    private var path: String { directory + "/app.log" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-tail-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func write(_ text: String, to file: String? = nil) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: file ?? path))
    }

    private func append(_ text: String, to file: String? = nil) throws {
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: file ?? path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }

    /// Ctrl-C, then the exit status and what the sample printed on standard error.
    private func interrupt(_ sample: SampleProcess) -> Int32? {
        sample.process.interrupt()
        return sample.waitForExit()
    }

    private func waitForError(_ sample: SampleProcess, containing text: String, file: StaticString = #filePath, line: UInt = #line) {
        waitUntil("standard error containing '\(text)'; got: \(sample.standardError)", timeout: .seconds(20), file: file, line: line) {
            sample.standardError.contains(text)
        }
    }

    func testPrintsTheLastLinesAndExits() throws {
        try write((1...20).map { "\($0)\n" }.joined())
        let sample = try SampleProcess("tail", ["-n", "3", path])
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "18\n19\n20\n")
    }

    /// Fewer lines than asked, and a last line without LF: the whole file, as it is.
    func testAShortFileWithoutAFinalNewlineIsPrintedWhole() throws {
        try write("one\ntwo")
        let sample = try SampleProcess("tail", [path])
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "one\ntwo")
    }

    /// The last lines of a file longer than the first 64 KiB window read from its end.
    func testTheLastLinesOfALongFileSpanningSeveralWindows() throws {
        let long = String(repeating: "x", count: 100_000)
        try write("first\n\(long)\n\(long)\nlast\n")
        let sample = try SampleProcess("tail", ["-n", "3", path])
        XCTAssertEqual(sample.waitForExit(), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "\(long)\n\(long)\nlast\n")
    }

    /// The last lines of a file larger than one read can take (`OpenFile.maxReadCount`, 1 GiB) that holds
    /// few line ends: 1 GiB of zeros (a sparse file: no disk) between "first" and "last", `-n 2` prints all
    /// of it. The file is scanned backwards once, in windows of at most 8 MiB. Before, the windows grew
    /// by four until one was the whole file: the read of more than 1 GiB failed with `EINVAL` (status 1,
    /// nothing printed) after 1.4 GB were read and 1 GiB held.
    func testTheLastLinesOfAFileLargerThanOneReadWithFewLineEnds() throws {
        try write("first\n")
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: (1 << 30) + (64 << 10))
        try handle.close()
        try append("last\n")
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        defer { try? FileManager.default.removeItem(atPath: path) }
        // The output only counted: `wc -c` holds none of it.
        let sample = try SampleProcess("tail", [path], shell: #"{ "$0" -n 2 --stats "$1"; echo "status $?" >&2; } | wc -c"#)
        XCTAssertEqual(sample.waitForExit(timeout: .seconds(120)), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines), String(size))
        XCTAssertTrue(sample.standardError.contains("status 0"), sample.standardError)
        // Scanned back once to the first line end, then copied once.
        XCTAssertTrue(sample.standardError.contains("tail: bytes read: \(2 * size)"), sample.standardError)
    }

    /// A source whose size does not say where its end is: a pipe (`/dev/stdin`), a FIFO, a `/proc` file (size 0).
    /// Each is read through once, keeping only the last lines. Before, the pipe and the FIFO failed with
    /// `ESPIPE` (status 1: positional reads), and the `/proc` file was printed whole (its size 0 put the
    /// start of its last lines at 0).
    func testTheLastLinesOfAPipeAFIFOAndAProcFile() throws {
        let piped = try SampleProcess("tail", [], shell: #"seq 1 100000 | "$0" -n 3 /dev/stdin"#)
        XCTAssertEqual(piped.waitForExit(), 0, piped.standardError)
        XCTAssertEqual(piped.standardOutput, "99998\n99999\n100000\n")

        let fifo = directory + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let fromFIFO = try SampleProcess("tail", [fifo], shell: #"printf 'a\nb\nc' > "$1" & "$0" -n 2 "$1"; status=$?; wait; exit $status"#)
        XCTAssertEqual(fromFIFO.waitForExit(), 0, fromFIFO.standardError)
        XCTAssertEqual(fromFIFO.standardOutput, "b\nc")

        // The sample's limits are this process's (inherited), so its /proc/self/limits reads as ours does.
        let limits = try String(contentsOfFile: "/proc/self/limits", encoding: .utf8)
        let lastTwo = limits.split(separator: "\n").suffix(2).map { $0 + "\n" }.joined()
        let proc = try SampleProcess("tail", ["-n", "2", "/proc/self/limits"])
        XCTAssertEqual(proc.waitForExit(), 0, proc.standardError)
        XCTAssertEqual(proc.standardOutput, lastTwo)
    }

    func testAMissingFileWithoutFollowIsStatusOneWithENOENT() throws {
        let sample = try SampleProcess("tail", [path])
        XCTAssertEqual(sample.waitForExit(), 1)
        XCTAssertTrue(sample.standardError.contains("ENOENT"), sample.standardError)
        XCTAssertTrue(sample.standardError.contains(path), sample.standardError)
    }

    /// Each append is read from where the last read stopped: 20 appends to an 8 MiB file read the
    /// last window once and the appended bytes, never the file again.
    func testAppendsAreReadFromTheLastOffsetNeverTheWholeFileAgain() throws {
        let line = String(repeating: "y", count: 79) + "\n"
        try write(String(repeating: line, count: 8 << 20 / 80))
        let sample = try SampleProcess("tail", ["-F", "-n", "1", "--stats", path])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: line)
        var appended = 0
        for number in 1...20 {
            let text = "appended \(number)\n"
            try append(text)
            appended += text.utf8.count
            sample.waitForOutput(containing: text)
        }
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, line + (1...20).map { "appended \($0)\n" }.joined())
        let stats = try XCTUnwrap(sample.standardError.split(separator: "\n").last { $0.hasPrefix("tail: bytes read: ") })
        let read = try XCTUnwrap(Int(stats.dropFirst("tail: bytes read: ".count)))
        // One 64 KiB window to find the last line, that line, then exactly what was appended.
        XCTAssertEqual(read, (64 << 10) + line.utf8.count + appended, String(stats))
    }

    /// A rotation (the file renamed away, a new one made under the name): what the old file got
    /// before the switch is printed, then the new file from its start.
    func testFollowsTheNameAcrossRotationWithoutLosingTheOldFilesLastLines() throws {
        try write("a\n")
        let sample = try SampleProcess("tail", ["-F", path])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "a\n")
        try append("b\n")
        try append("c\n")
        XCTAssertEqual(rename(path, path + ".1"), 0)
        try write("d\n")
        sample.waitForOutput(containing: "d\n")
        try append("e\n")
        sample.waitForOutput(containing: "e\n")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "a\nb\nc\nd\ne\n")
        XCTAssertTrue(sample.standardError.contains("has been replaced") || sample.standardError.contains("has appeared"),
                      sample.standardError)
    }

    /// A rotation whose new file comes later (logrotate's `nocreate`: the writer goes on appending
    /// to the renamed file until it reopens the name): the renamed file is read while the name
    /// names nothing, so its lines written meanwhile come out before the new file's.
    func testAFileRenamedAwayIsReadUntilTheNewFileAppears() throws {
        try write("a\n")
        let sample = try SampleProcess("tail", ["-F", path])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "a\n")
        XCTAssertEqual(rename(path, path + ".1"), 0)
        waitForError(sample, containing: "has become inaccessible")
        try append("b\n", to: path + ".1")
        sample.waitForOutput(containing: "b\n")
        try append("c\n", to: path + ".1")
        try write("d\n")
        sample.waitForOutput(containing: "d\n")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "a\nb\nc\nd\n")
        XCTAssertTrue(sample.standardError.contains("has appeared"), sample.standardError)
    }

    /// A file truncated (to less than was read) is read again from its start, with a note.
    func testATruncatedFileIsReadAgainFromItsStart() throws {
        try write("x1\nx2\n")
        let sample = try SampleProcess("tail", ["-F", path])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "x2\n")
        XCTAssertEqual(truncate(path, 0), 0)
        try append("z\n")
        sample.waitForOutput(containing: "z\n")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "x1\nx2\nz\n")
        XCTAssertTrue(sample.standardError.contains("file truncated"), sample.standardError)
    }

    /// Deleted, then made again: a note for each, and the new file's lines.
    func testADeletedFileIsFollowedWhenItIsMadeAgain() throws {
        try write("one\n")
        let sample = try SampleProcess("tail", ["-F", path])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "one\n")
        XCTAssertEqual(unlink(path), 0)
        waitForError(sample, containing: "has become inaccessible")
        try write("two\n")
        sample.waitForOutput(containing: "two\n")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "one\ntwo\n")
        XCTAssertTrue(sample.standardError.contains("has appeared"), sample.standardError)
    }

    /// `-F` on a name that does not exist yet waits for it.
    func testFollowingAMissingFileWaitsForIt() throws {
        let sample = try SampleProcess("tail", ["-F", path])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        waitForError(sample, containing: "cannot open")
        try write("hello\n")
        sample.waitForOutput(containing: "hello\n")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "hello\n")
    }

    /// A directory inotify cannot watch (searchable, not readable: mode 0o311) holding a readable file:
    /// `-F` says so and follows the file by looking every `--interval`, as GNU tail reverts to polling.
    /// Before, the watch's `EACCES` ended the sample with status 1 after the first lines. (As root, the
    /// sample runs as `nobody`, whom the mode applies to.)
    func testFollowingAFileInADirectoryThatCannotBeWatchedLooksEveryInterval() throws {
        let locked = directory + "/locked"
        let file = locked + "/app.log"
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: false)
        try write("one\n", to: file)
        XCTAssertEqual(chmod(file, 0o666), 0)
        XCTAssertEqual(chmod(locked, 0o311), 0)
        XCTAssertEqual(chmod(directory, 0o755), 0)
        defer { chmod(locked, 0o755) }
        let asNobody = geteuid() == 0 ? "setpriv --reuid=nobody --regid=nogroup --clear-groups " : ""
        let sample = try SampleProcess("tail", ["-F", "--interval", "100ms", file],
                                       shell: "exec \(asNobody)\"$0\" \"$@\"")
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "one\n")
        waitForError(sample, containing: "cannot watch '\(locked)' (EACCES")
        try append("two\n", to: file)
        sample.waitForOutput(containing: "two\n")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "one\ntwo\n")
    }

    /// A rotation that makes the new file for another user (logrotate's `create 0600 root root` while a user
    /// follows): `-F` says it cannot open it ("Permission denied"), tries again at each wake, and follows it from
    /// its start once it can be read ("has become accessible"), as GNU `tail -F` does. Before, the open's
    /// `EACCES` ended the sample with status 1. (As root, the sample runs as `nobody`.)
    func testARotationToAFileThatCannotBeReadYetIsWaitedFor() throws {
        try write("one\n")
        XCTAssertEqual(chmod(path, 0o644), 0)
        XCTAssertEqual(chmod(directory, 0o755), 0)
        let asNobody = geteuid() == 0 ? "setpriv --reuid=nobody --regid=nogroup --clear-groups " : ""
        let sample = try SampleProcess("tail", ["-F", "--interval", "100ms", path], shell: "exec \(asNobody)\"$0\" \"$@\"")
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "one\n")
        XCTAssertEqual(rename(path, path + ".1"), 0)
        // Made with mode 0 in one call (FileManager.createFile sets its attributes after the file is in
        // place, which left a moment where the sample could meet the file with another mode).
        let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o000)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        XCTAssertEqual(Array("two\n".utf8).withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }, 4)
        XCTAssertEqual(close(descriptor), 0)
        waitForError(sample, containing: "cannot open '\(path)' for reading: Permission denied")
        XCTAssertEqual(chmod(path, 0o644), 0)
        sample.waitForOutput(containing: "two\n")
        waitForError(sample, containing: "'\(path)' has become accessible")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "one\ntwo\n")
    }

    /// `-F` on a name whose directory does not exist yet, then is made, removed and made again (a log
    /// directory rotated away): the sample waits, and follows each new file. The watch of the directory
    /// failed with ENOENT and the sample exited 1 ("ENOENT: no such file or directory (stat DIR)", and
    /// "the watched path was deleted or moved away" for the removal) where GNU tail -F goes on.
    func testFollowingAFileWhoseDirectoryIsMissingOrRemovedWaitsForIt() throws {
        let logs = directory + "/logs"
        let file = logs + "/app.log"
        let sample = try SampleProcess("tail", ["-F", "--interval", "100ms", file])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        waitForError(sample, containing: "cannot open")
        try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: false)
        try write("first\n", to: file)
        sample.waitForOutput(containing: "first\n")
        try FileManager.default.removeItem(atPath: logs)
        waitForError(sample, containing: "has become inaccessible")
        try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: false)
        try write("second\n", to: file)
        sample.waitForOutput(containing: "second\n")
        try append("third\n", to: file)
        sample.waitForOutput(containing: "third\n")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "first\nsecond\nthird\n")
    }

    /// The followed file swapped for a directory (`renameat2` `RENAME_EXCHANGE`, as a deploy's swap does), then
    /// the directory swapped for a new file the same way: `-F` says "'FILE' has been replaced with an untailable
    /// file", waits, and follows the new file from its start ("has become accessible"), as GNU `tail -F` does.
    /// Before, reading the directory failed with `EISDIR` and the sample exited 1.
    func testAFileBrieflyReplacedByADirectoryIsFollowedWhenAFileReturns() throws {
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else {
            throw XCTSkip("this C library has no renameat2")
        }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        let swapped = directory + "/release"
        try FileManager.default.createDirectory(atPath: swapped, withIntermediateDirectories: false)
        try write("one\n")
        let sample = try SampleProcess("tail", ["-F", "--interval", "100ms", path])
        defer { if sample.process.isRunning { sample.process.terminate() } }
        sample.waitForOutput(containing: "one\n")
        let exchange: UInt32 = 2  // RENAME_EXCHANGE
        guard renameat2(AT_FDCWD, path, AT_FDCWD, swapped, exchange) == 0 else {
            throw XCTSkip("this file system cannot exchange names (errno \(errno))")
        }
        waitForError(sample, containing: "tail: '\(path)' has been replaced with an untailable file")
        // Exchanged again, so that the name never names nothing (which is said differently).
        try write("two\n", to: directory + "/next.log")
        XCTAssertEqual(renameat2(AT_FDCWD, directory + "/next.log", AT_FDCWD, path, exchange), 0)
        sample.waitForOutput(containing: "two\n")
        waitForError(sample, containing: "tail: '\(path)' has become accessible")
        XCTAssertEqual(interrupt(sample), 0, sample.standardError)
        XCTAssertEqual(sample.standardOutput, "one\ntwo\n")
        XCTAssertFalse(sample.standardError.contains("EISDIR"), sample.standardError)
    }
}

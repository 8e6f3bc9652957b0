import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// A test case with a fresh temporary directory per test, and helpers for the file-system signals.
class FileSystemTestCase: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-fs-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        // Directories a test made unwritable must be writable again to be removed.
        _ = Foundation.chmod(directory, 0o755)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A path in the test's directory.
    func path(_ name: String) -> String { directory + "/" + name }

    /// Runs `body` on a `LoopHarness`, which checks every handle and request ended and the loop closed cleanly.
    func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    /// `checked` for async tests: runs `body` on a fresh `LoopHarness`, then checks every handle and request
    /// ended and the loop closed cleanly. Call the async forms with `on: harness.loop` (or on a file opened there).
    func withCheckedHarness(_ body: (LoopHarness) async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async {
        await withFinishedHarness(named: "fs-async", body, file: file, line: line)
    }

    /// The `UVError` that `call` throws (another error is rethrown). If it returns, the test fails and the test
    /// goes on with an error that matches nothing (code 0, "nothing was thrown"), so one break shows every check it fails.
    func thrownError<Returned>(_ call: () async throws -> Returned, file: StaticString = #filePath, line: UInt = #line) async throws -> UVError {
        do {
            let returned = try await call()
            XCTFail("expected a UVError, got \(returned)", file: file, line: line)
            return UVError(code: 0, message: "nothing was thrown")
        } catch let error as UVError {
            return error
        }
    }

    /// Asserts that `call` (an async form) throws the very `UVError` `signal` (its signal) fails with, named
    /// `name`, with `path` in its context; returns it.
    @discardableResult
    func assertThrowsTheSignalsError<Value, Returned>(_ harness: LoopHarness, _ signal: Signal<Value>, _ call: () async throws -> Returned,
                                            named name: String, path: String,
                                            file: StaticString = #filePath, line: UInt = #line) async throws -> UVError {
        let sent = try failure(harness, signal, file: file, line: line)
        let thrown = try await thrownError(call, file: file, line: line)
        XCTAssertEqual(thrown.name, name, thrown.description, file: file, line: line)
        XCTAssertTrue(thrown.context.contains(path), "the context names \(path): \(thrown)", file: file, line: line)
        XCTAssertEqual(thrown.code, sent.code, file: file, line: line)
        XCTAssertEqual(thrown.message, sent.message, file: file, line: line)
        XCTAssertEqual(thrown.context, sent.context, file: file, line: line)
        return thrown
    }

    /// Writes `bytes` to `path` with Foundation (not the code under test).
    func makeFile(_ name: String, _ bytes: [UInt8] = [1, 2, 3]) throws -> String {
        let file = path(name)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }

    /// What `path` holds, read with Foundation (not the code under test).
    func contents(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The signal's terminal event, which must be a completion; returns its values.
    @discardableResult
    func completes<Value>(_ harness: LoopHarness, _ signal: Signal<Value>, file: StaticString = #filePath, line: UInt = #line) throws -> [Value] {
        let recorder = try harness.record(signal)
        let terminal = try recorder.waitForTermination()
        XCTAssertTrue(terminal.isCompleted, "\(terminal)", file: file, line: line)
        return recorder.values
    }

    /// The signal's `UVError`; fails the test if it completed or failed with another error.
    func failure<Value>(_ harness: LoopHarness, _ signal: Signal<Value>, file: StaticString = #filePath, line: UInt = #line) throws -> UVError {
        let recorder = try harness.record(signal)
        let terminal = try recorder.waitForTermination()
        return try XCTUnwrap(terminal.error as? UVError, "\(terminal)", file: file, line: line)
    }

    /// What Glibc's `lstat` (or `stat`) says, independently of the code under test.
    func systemStat(_ path: String, followLinks: Bool = false) throws -> Glibc.stat {
        var info = Glibc.stat()
        let result = fstatat(AT_FDCWD, path, &info, followLinks ? 0 : AT_SYMLINK_NOFOLLOW)
        guard result == 0 else { throw TestFailure("stat \(path): errno \(errno)") }
        return info
    }

    /// How many of this process's descriptors are open on `path` (throws where `/proc/self/fd` cannot be read).
    func descriptors(openOn path: String) throws -> Int { try descriptorsOpen(on: path) }
}

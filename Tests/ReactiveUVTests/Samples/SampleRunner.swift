import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Runs a sample executable the way a user would and collects its output.
final class SampleProcess: @unchecked Sendable {
    // `output` and `errors` are protected by their `Locked` boxes; `process` is used from the test thread only.
    let process = Process()
    private let output = Locked(Data())
    private let errors = Locked(Data())
    /// Pipes that reached end of file.
    private let closedPipes = Locked(0)

    /// The built sample next to the test bundle (`swift build` puts every product in one folder).
    static func executable(_ name: String) -> URL {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [bundle, bundle.deletingLastPathComponent()] {
            let url = candidate.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return bundle.appendingPathComponent(name)
    }

    /// Starts the sample; with `openFileLimit`, under `ulimit -n` of that many descriptors; with
    /// `shell`, as `/bin/sh -c shell` with the sample's path as `$0` (for pipelines and redirections:
    /// `printf 'a\n' | "$0"`, `"$0" <&-`); with `standardInput`, reading that descriptor.
    init(_ name: String, _ arguments: [String] = [], environment: [String: String] = [:], openFileLimit: Int? = nil,
         shell: String? = nil, standardInput: FileHandle? = nil) throws {
        let url = SampleProcess.executable(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw SampleMissing(path: url.path)
        }
        if let standardInput { process.standardInput = standardInput }
        if let shell {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", shell, url.path] + arguments
        } else if let openFileLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", url.path] + arguments
        } else {
            process.executableURL = url
            process.arguments = arguments
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // One blocking reader per pipe: it sees end of file for sure (readabilityHandler
        // does not always report it on Linux) and leaves nothing registered behind.
        let closedPipes = self.closedPipes
        for (pipe, sink) in [(out, output), (err, errors)] {
            let handle = UncheckedBox(pipe.fileHandleForReading)
            Thread {
                while true {
                    let data = handle.value.availableData
                    if data.isEmpty { break }
                    sink.withLock { $0.append(data) }
                }
                closedPipes.withLock { $0 += 1 }
            }.start()
        }
    }

    var standardOutput: String { String(decoding: output.current, as: UTF8.self) }
    var standardError: String { String(decoding: errors.current, as: UTF8.self) }

    /// Waits for the process to exit; fails the test and kills it at the deadline.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(20), file: StaticString = #filePath, line: UInt = #line) -> Int32? {
        let exited = waitUntil("the sample to exit", timeout: timeout, file: file, line: line) { !process.isRunning }
        if !exited {
            process.terminate()
            return nil
        }
        // Everything the process wrote has been read once both pipes reached end of file.
        waitUntil("the output pipes to reach end of file", timeout: .seconds(5), file: file, line: line) { closedPipes.current == 2 }
        return process.terminationStatus
    }

    func waitForOutput(containing text: String, timeout: Duration = .seconds(20), file: StaticString = #filePath, line: UInt = #line) {
        // The output is shown as it is when the wait gives up (composed before the wait, it showed
        // the output from before it, and hid what the sample printed meanwhile).
        if waitUntil("output containing '\(text)'", timeout: timeout, file: file, line: line, { standardOutput.contains(text) }) {
            return
        }
        XCTFail("the sample's output when the wait gave up: \(standardOutput); standard error: \(standardError); "
                + (process.isRunning ? "still running" : "exited with \(process.terminationStatus)"), file: file, line: line)
    }
}

struct SampleMissing: Error, CustomStringConvertible {
    let path: String
    var description: String { "sample not built at \(path): run `swift build` before `swift test` (scripts/test does)" }
}

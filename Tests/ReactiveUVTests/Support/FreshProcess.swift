import Foundation
import XCTest

/// Runs one test of this test binary again in a child process (a fresh process: libuv's pool not
/// started yet), with `environment` set (a nil value unsets the variable), on CPU 0 alone with `oneCPU` (through util-linux's
/// `taskset`). Returns what the child wrote (standard output and error together), after checking
/// that it exited with status 0.
func runTestInFreshProcess(_ test: String, environment extra: [String: String?], oneCPU: Bool = false,
                           file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let child = Process()
    let testArguments = [CommandLine.arguments[0], "ReactiveUVTests.\(test)"]
    child.executableURL = URL(fileURLWithPath: oneCPU ? "/usr/bin/taskset" : testArguments[0])
    child.arguments = oneCPU ? ["-c", "0"] + testArguments : Array(testArguments.dropFirst())
    var environment = ProcessInfo.processInfo.environment
    for (name, value) in extra { environment[name] = value }
    environment["SWIFT_BACKTRACE"] = "enable=no"
    child.environment = environment
    let output = Pipe()
    child.standardOutput = output
    child.standardError = output
    try child.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    XCTAssertEqual(child.terminationStatus, 0, text, file: file, line: line)
    return text
}

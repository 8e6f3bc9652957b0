import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class ProcessTests: XCTestCase {
    func testOutputErrorAndExitStatusArriveInOrder() throws {
        try checked { harness in
            let child = try harness.record(ChildProcess.run("/bin/sh", arguments: ["-c", "echo out; echo err >&2; exit 3"]))
            XCTAssertTrue(try child.waitForTermination().isCompleted)
            guard case .started(let pid)? = child.values.first else { return XCTFail("\(child.values)") }
            XCTAssertGreaterThan(pid, 0)
            // `.exited` comes once, when the child exits: its last output may still follow it.
            XCTAssertEqual(exits(child), [ProcessExit(status: 3, signal: 0)])
            XCTAssertEqual(output(child, .standardOutput), "out\n")
            XCTAssertEqual(output(child, .standardError), "err\n")
        }
    }

    func testInputEnvironmentAndWorkingDirectory() throws {
        try checked { harness in
            let cat = try harness.record(ChildProcess.run("cat", input: Array("hello through stdin".utf8)))
            XCTAssertTrue(try cat.waitForTermination().isCompleted)
            XCTAssertEqual(output(cat, .standardOutput), "hello through stdin")
            XCTAssertEqual(exits(cat), [ProcessExit(status: 0, signal: 0)])

            let shell = try harness.record(ChildProcess.run("/bin/sh", arguments: ["-c", "echo $GREETING; pwd"],
                                                            environment: ["GREETING": "hi", "PATH": "/usr/bin:/bin"],
                                                            workingDirectory: "/"))
            XCTAssertTrue(try shell.waitForTermination().isCompleted)
            XCTAssertEqual(output(shell, .standardOutput), "hi\n/\n")
        }
    }

    func testAMegabyteOfOutputArrivesWhole() throws {
        try checked { harness in
            let child = try harness.record(ChildProcess.run("head", arguments: ["-c", "1000000", "/dev/zero"]))
            XCTAssertTrue(try child.waitForTermination(timeout: .seconds(30)).isCompleted)
            let bytes = child.values.reduce(0) { total, event in
                if case .standardOutput(let chunk) = event { return total + chunk.count }
                return total
            }
            XCTAssertEqual(bytes, 1_000_000)
        }
    }

    func testAMissingExecutableIsENOENT() throws {
        try checked { harness in
            for executable in ["/no/such/program", "no-such-program-anywhere"] {
                let child = try harness.record(ChildProcess.run(executable))
                let error = try XCTUnwrap(try child.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "ENOENT")
                XCTAssertTrue(error.description.contains(executable), error.description)
                XCTAssertEqual(child.values.count, 0)
            }
        }
    }

    /// Disposing a running child terminates it and reaps it: no handle and no zombie are left.
    func testDisposingTerminatesAndReapsTheChild() throws {
        try checked { harness in
            let child = try harness.record(ChildProcess.run("sleep", arguments: ["30"]))
            guard case .started(let pid) = try child.waitForValues(1)[0] else { return XCTFail() }
            child.dispose()
            try harness.wait(for: "the process handle to close") { (try? harness.loop.openHandles()) == [] }
            XCTAssertEqual(kill(pid, 0), -1, "the child (or its zombie) still exists")
            XCTAssertEqual(errno, ESRCH)
        }
    }

    /// A child that ignores SIGTERM is killed after the grace period.
    func testAChildIgnoringSIGTERMIsKilledAfterTheGrace() throws {
        try checked { harness in
            let start = SchedulerInstant.now
            let child = try harness.record(ChildProcess.run("/bin/sh", arguments: ["-c", "trap '' TERM; echo ready; sleep 30"],
                                                            killGrace: .milliseconds(200)))
            try child.wait(for: "ready") { $0.contains { if case .next(.standardOutput) = $0 { return true } else { return false } } }
            guard case .started(let pid) = child.values[0] else { return XCTFail() }
            child.dispose()
            try harness.wait(for: "the process handle to close") { (try? harness.loop.openHandles()) == [] }
            XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(200), "SIGKILL came before the grace period")
            XCTAssertEqual(kill(pid, 0), -1)
        }
    }

    /// A child that leaves a grandchild holding its standard output (a daemon does): `.exited`
    /// comes when the child exits, while the grandchild still runs; the grandchild's
    /// later output still arrives, and the signal completes once it closes the pipe.
    func testExitedArrivesWhenTheChildExitsWhileAGrandchildHoldsItsOutput() throws {
        try checked { harness in
            // The grandchild prints its pid, waits for SIGTERM, then writes once more (its
            // output arrives after `.exited`) and exits, which closes the last end of the pipe.
            let script = "sh -c 'trap \"echo bye; exit 0\" TERM; echo grandchild $$; while :; do sleep 1; done' & echo child done"
            let child = try harness.record(ChildProcess.run("/bin/sh", arguments: ["-c", script]))
            try child.wait(for: "the grandchild's pid", timeout: .seconds(30)) { events in
                let bytes = events.flatMap { event -> [UInt8] in
                    if case .next(.standardOutput(let chunk)) = event { return chunk }
                    return []
                }
                return String(decoding: bytes, as: UTF8.self).contains("grandchild ") && bytes.last == UInt8(ascii: "\n")
            }
            let text = output(child, .standardOutput)
            let grandchild = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("grandchild ") }
                .flatMap { Int32($0.dropFirst("grandchild ".count)) }, text)
            defer { kill(grandchild, SIGKILL) }  // when the test fails early
            try child.wait(for: ".exited", timeout: .seconds(30)) { events in
                events.contains { if case .next(.exited) = $0 { return true } else { return false } }
            }
            XCTAssertEqual(kill(grandchild, 0), 0, "the grandchild is gone: this test no longer tests anything")
            XCTAssertNil(child.terminal, "the signal completed while the grandchild still holds the output pipe")
            XCTAssertEqual(exits(child), [ProcessExit(status: 0, signal: 0)])

            kill(grandchild, SIGTERM)
            XCTAssertTrue(try child.waitForTermination(timeout: .seconds(30)).isCompleted)
            XCTAssertTrue(output(child, .standardOutput).hasSuffix("bye\n"), "the grandchild's output after the exit arrived")
            XCTAssertEqual(child.values.last, .standardOutput(Array("bye\n".utf8)))
            waitUntil("the grandchild to be gone") { kill(grandchild, 0) == -1 || isZombie(grandchild) }
        }
    }

    /// A loop's shutdown kills a running child and reaps it: the pid is gone, not left a zombie
    /// (libuv reaps only the children of open process handles, and the shutdown closes the handle).
    func testLoopShutdownKillsAndReapsTheChild() throws {
        let loop = EventLoop(name: "process-shutdown")
        let recorder = Locked<EventRecorder<ProcessOutput>?>(nil)
        loop.execute { recorder.withLock { $0 = EventRecorder(ChildProcess.run("sleep", arguments: ["30"])) } }
        waitUntil("the child") { recorder.current?.values.isEmpty == false }
        guard case .started(let pid)? = recorder.current?.values.first else { return XCTFail() }
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(recorder.current?.terminal?.error as? EventLoopError, .shutDown(loop: "process-shutdown"))
        // A zombie answers kill(pid, 0); only a reaped pid is ESRCH. The wait is a hang guard.
        waitUntil("the killed child to be reaped", timeout: .seconds(60)) { kill(pid, 0) == -1 && errno == ESRCH }
        XCTAssertFalse(isZombie(pid))
    }

    /// Many children at once, killed by one shutdown: every one is reaped.
    func testLoopShutdownReapsEveryChildItKilled() throws {
        let loop = EventLoop(name: "process-shutdown-many")
        let recorders = Locked<[EventRecorder<ProcessOutput>]>([])
        loop.execute {
            let started = (0..<8).map { _ in EventRecorder(ChildProcess.run("sleep", arguments: ["30"])) }
            recorders.withLock { $0 = started }
        }
        waitUntil("the children") { recorders.current.count == 8 && recorders.current.allSatisfy { !$0.values.isEmpty } }
        let pids = recorders.current.compactMap { recorder -> Int32? in
            if case .started(let pid)? = recorder.values.first { return pid } else { return nil }
        }
        XCTAssertEqual(pids.count, 8)
        XCTAssertEqual(try loop.tryShutdown().loopCloseResult, 0)
        waitUntil("every killed child to be reaped", timeout: .seconds(60)) {
            pids.allSatisfy { kill($0, 0) == -1 && errno == ESRCH }
        }
    }

    private enum Stream { case standardOutput, standardError }

    /// Every `.exited` the recorder saw, in order.
    private func exits(_ recorder: EventRecorder<ProcessOutput>) -> [ProcessExit] {
        recorder.values.compactMap { if case .exited(let exit) = $0 { return exit } else { return nil } }
    }

    private func output(_ recorder: EventRecorder<ProcessOutput>, _ stream: Stream) -> String {
        var bytes: [UInt8] = []
        for value in recorder.values {
            switch (value, stream) {
            case (.standardOutput(let chunk), .standardOutput), (.standardError(let chunk), .standardError): bytes += chunk
            default: break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// Whether `pid` is a zombie (dead, not yet reaped).
private func isZombie(_ pid: Int32) -> Bool {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
    return status.split(separator: ")").last?.split(separator: " ").first == "Z"
}

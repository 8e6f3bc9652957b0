import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `ChildProcess.spawn`: talking to a child through its pipes, signalling it, stdio choices, detached children.
final class ChildProcessSpawnTests: XCTestCase {
    /// 1 MiB streamed through `cat` comes back byte for byte, while the writer keeps the
    /// standard input's queue bounded by waiting for its writes to flush.
    func testAMegabyteThroughCatComesBackWholeWithTheWriteQueueBounded() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("cat", standardError: .ignore))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let input = try XCTUnwrap(child.standardInput)
            let output = try harness.record(try XCTUnwrap(child.standardOutput).bytes)
            let exit = try harness.record(child.exit)
            let payload = bytePattern(1 << 20, seed: 16)
            let pump = StdinPump(input, payload: payload, window: 64 << 10, chunk: 16 << 10)
            try harness.onLoop { pump.run() }

            XCTAssertTrue(try output.waitForTermination(timeout: .seconds(30)).isCompleted)
            let echoed = received(output)
            XCTAssertEqual(echoed.count, payload.count)
            XCTAssertTrue(echoed == payload, "the bytes cat echoed differ from the bytes written")
            let (failure, maxQueued) = try harness.onLoop { (pump.failure, pump.maxQueued) }
            XCTAssertNil(failure)
            XCTAssertLessThanOrEqual(maxQueued, (64 << 10) + (16 << 10), "the writer's queue grew past its window")
            XCTAssertTrue(try exit.waitForTermination().isCompleted)
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: 0)])
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    /// Past `maxQueuedBytes`, a write to a child that does not read is refused with ENOBUFS; the queue never exceeds the limit.
    func testStandardInputsQueueIsBoundedByItsLimits() throws {
        try checked { harness in
            let limit = 256 << 10
            let spawn = try harness.record(ChildProcess.spawn("sleep", arguments: ["100"], standardOutput: .ignore, standardError: .ignore,
                                                              limits: StreamBufferLimits(maxQueuedBytes: limit)))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let input = try XCTUnwrap(child.standardInput)
            let results = Locked<[String]>([])
            let maxQueued = try harness.onLoop { () -> Int in
                var maxQueued = 0
                for _ in 0..<64 {  // 4 MiB: more than the kernel's socket buffers hold
                    input.send([UInt8](repeating: 7, count: 64 << 10)) { error in
                        results.append((error as? UVError)?.name ?? "ok")
                    }
                    maxQueued = max(maxQueued, input.queuedWriteByteCount)
                }
                return maxQueued
            }
            XCTAssertLessThanOrEqual(maxQueued, limit)
            try harness.wait(for: "a refused write") { results.current.contains("ENOBUFS") }
            XCTAssertTrue(input.isOpen, "a refused write with a completion must not end the pipe")
            child.kill(signal: SIGKILL)
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    func testKillWithSIGTERMReportsTheSignalInTheExit() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("sleep", arguments: ["100"], standardInput: .ignore,
                                                              standardOutput: .ignore, standardError: .ignore))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            XCTAssertGreaterThan(child.pid, 0)
            let exit = try harness.record(child.exit)
            let sent = try harness.record(child.kill(signal: SIGTERM))
            XCTAssertTrue(try sent.waitForTermination().isCompleted)
            XCTAssertTrue(try exit.waitForTermination().isCompleted)
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGTERM)])
            XCTAssertEqual(exit.values.first?.description, "killed by signal \(SIGTERM)")
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    /// `killGroup` reaches the grandchild that a detached shell started, which `kill` alone would leave running.
    func testKillGroupKillsTheGrandchildToo() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", "sleep 100 & echo $!; sleep 100"],
                                                              standardInput: .ignore, standardError: .ignore, detached: true))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let output = try harness.record(try XCTUnwrap(child.standardOutput).bytes)
            try output.wait(for: "the grandchild's pid") { bytes(in: $0).last == UInt8(ascii: "\n") }
            let text = String(decoding: received(output), as: UTF8.self)
            let grandchild = try XCTUnwrap(Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), text)
            defer { kill(grandchild, SIGKILL) }  // when the test fails early
            XCTAssertEqual(getpgid(grandchild), child.pid, "the grandchild is not in the child's group: nothing to test")

            let exit = try harness.record(child.exit)
            XCTAssertTrue(try harness.record(child.killGroup(signal: SIGTERM)).waitForTermination().isCompleted)
            XCTAssertTrue(try exit.waitForTermination().isCompleted)
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGTERM)])
            try harness.wait(for: "the grandchild to die") { kill(grandchild, 0) == -1 || isZombie(grandchild) }
            // Both holders of the output pipe are gone: it reaches EOF and the spawn completes.
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    /// `.inherit` shares this process's descriptor, `.ignore` gives `/dev/null`, `.descriptor` passes one of ours.
    func testInheritIgnoreAndDescriptorChoices() throws {
        try checked { harness in
            // The shell names what its descriptors 0 and 1 are; its standard error is the pipe we read.
            // (Read in `$(...)`: dash applies a command's `>&2` in the shell itself, which would change $$'s fd 1.)
            let script = "a=$(readlink /proc/$$/fd/0); b=$(readlink /proc/$$/fd/1); echo \"$a\" >&2; echo \"$b\" >&2"
            let inherited = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", script],
                                                                  standardInput: .ignore, standardOutput: .inherit))
            let inheritedChild = try XCTUnwrap(try inherited.waitForValues(1).first)
            let inheritedNames = try harness.record(try XCTUnwrap(inheritedChild.standardError).bytes)
            XCTAssertTrue(try inheritedNames.waitForTermination().isCompleted)
            let ours = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/1")
            XCTAssertEqual(String(decoding: received(inheritedNames), as: UTF8.self), "/dev/null\n\(ours)\n")
            XCTAssertNil(inheritedChild.standardInput)
            XCTAssertNil(inheritedChild.standardOutput)
            XCTAssertTrue(try inherited.waitForTermination().isCompleted)

            var ends: [Int32] = [0, 0]
            XCTAssertEqual(pipe(&ends), 0)
            defer { close(ends[0]) }
            let passed = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", "echo through the descriptor"],
                                                               standardInput: .ignore, standardOutput: .descriptor(ends[1]),
                                                               standardError: .ignore))
            XCTAssertTrue(try passed.waitForTermination().isCompleted)
            close(ends[1])  // ours: the child's copy closed when it exited, so the read below ends
            var buffer = [UInt8](repeating: 0, count: 100)
            let count = read(ends[0], &buffer, buffer.count)
            XCTAssertEqual(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self), "through the descriptor\n")
        }
    }

    /// A detached child leads its own session and group, and disposing the subscription leaves it
    /// running (no signal sent); the handle stays open until it exits, so it is still reaped.
    func testADetachedChildSurvivesDisposalAndIsStillReaped() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("sleep", arguments: ["100"], standardInput: .ignore,
                                                              standardOutput: .ignore, standardError: .ignore, detached: true))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            defer { kill(child.pid, SIGKILL) }  // when the test fails early
            XCTAssertTrue(child.isDetached)
            XCTAssertEqual(getsid(child.pid), child.pid, "the child is not in a session of its own")
            XCTAssertEqual(getpgid(child.pid), child.pid, "the child does not lead its own group")
            let exit = try harness.record(child.exit)

            spawn.dispose()
            try harness.onLoop {}  // the disposal, queued before this, has run
            XCTAssertEqual(kill(child.pid, 0), 0, "the detached child is gone after the disposal")
            XCTAssertFalse(isZombie(child.pid))
            XCTAssertEqual(try pendingSignals(child.pid) & (1 << (UInt64(SIGTERM) - 1)), 0, "the disposal sent SIGTERM")
            XCTAssertTrue(try harness.loop.openHandles().contains { $0.kind == "process" },
                          "the process handle closed before the child exited: nobody reaps it")

            kill(child.pid, SIGKILL)
            XCTAssertTrue(try exit.waitForTermination().isCompleted)
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGKILL)])
            try harness.wait(for: "the process handle to close") { (try? harness.loop.openHandles()) == [] }
        }
    }

    /// Writing to a child that closed its input, or that exited, fails with EPIPE through the write's result (no SIGPIPE death).
    func testWritingToAChildThatClosedItsInputOrExitedIsEPIPE() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("/bin/sh", arguments: ["-c", "exec 0<&-; echo closed; exec sleep 100"],
                                                              standardError: .ignore))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            let output = try harness.record(try XCTUnwrap(child.standardOutput).bytes)
            try output.wait(for: "the child to close its input") { bytes(in: $0) == Array("closed\n".utf8) }
            let write = try harness.record(try XCTUnwrap(child.standardInput).write(bytePattern(1 << 20, seed: 1)))
            _ = try write.waitForTermination()
            XCTAssertEqual(errorName(write), "EPIPE")
            child.kill(signal: SIGKILL)
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)

            let exited = try harness.record(ChildProcess.spawn("true", standardOutput: .ignore, standardError: .ignore))
            let gone = try XCTUnwrap(try exited.waitForValues(1).first)
            XCTAssertTrue(try exited.waitForTermination().isCompleted)
            let late = try harness.record(try XCTUnwrap(gone.standardInput).write(Array("too late".utf8)))
            _ = try late.waitForTermination()
            XCTAssertEqual(errorName(late), "EPIPE")
        }
    }

    /// The processes guide's spawn example, run: cat echoes the line, exits at EOF, and every handle closes.
    func testTheProcessesGuideSpawnExampleRunsToTheEnd() throws {
        try assertDocumentBlock("docs/guides/processes.md", containing: "ChildProcess.spawn(\"cat\"", matches: "GUIDE-PROCESSES-SPAWN")
        try checked { harness in
            try harness.onLoop {
                // GUIDE-PROCESSES-SPAWN-BEGIN
                ChildProcess.spawn("cat", standardError: .ignore)
                    .subscribeNext { child in
                        child.standardOutput?.bytes.subscribeNext { print(String(decoding: $0, as: UTF8.self), terminator: "") }
                        child.standardInput?.send(Array("hello\n".utf8))
                        child.standardInput?.close()  // EOF after the bytes: cat exits
                    }
                // GUIDE-PROCESSES-SPAWN-END
            }
            try harness.wait(for: "cat to exit and its handles to close") { (try? harness.loop.openHandles()) == [] }
        }
    }

    // MARK: - bad input

    func testAMissingExecutableIsENOENT() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("/no/such/program"))
            let error = try XCTUnwrap(try spawn.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ENOENT")
            XCTAssertTrue(error.description.contains("/no/such/program"), error.description)
            XCTAssertEqual(spawn.values.count, 0)
        }
    }

    /// Signal numbers outside 1...64 are EINVAL and send nothing; `killGroup` on a child that shares our group is EINVAL.
    func testASignalNumberOutOfRangeOrAGroupThatIsOursIsEINVAL() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("sleep", arguments: ["100"], standardInput: .ignore,
                                                              standardOutput: .ignore, standardError: .ignore))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            for number: Int32 in [0, -1, 65, 1000] {
                let kill = try harness.record(child.kill(signal: number))
                _ = try kill.waitForTermination()
                XCTAssertEqual(errorName(kill), "EINVAL", "kill(signal: \(number))")
                let group = try harness.record(child.killGroup(signal: number))
                _ = try group.waitForTermination()
                XCTAssertEqual(errorName(group), "EINVAL", "killGroup(signal: \(number))")
            }
            let ours = try harness.record(child.killGroup(signal: SIGTERM))
            let error = try XCTUnwrap(try ours.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EINVAL")
            XCTAssertTrue(error.message.contains("detached"), error.message)
            XCTAssertEqual(kill(child.pid, 0), 0, "a refused signal reached the child")
            XCTAssertNil(spawn.terminal)
            child.kill(signal: SIGKILL)
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
        }
    }

    /// After the exit, `kill` sends nothing (the pid may be another process's now): ESRCH.
    func testKillAfterTheExitIsESRCH() throws {
        try checked { harness in
            let spawn = try harness.record(ChildProcess.spawn("true", standardInput: .ignore, standardOutput: .ignore,
                                                              standardError: .ignore))
            let child = try XCTUnwrap(try spawn.waitForValues(1).first)
            XCTAssertTrue(try spawn.waitForTermination().isCompleted)
            let kill = try harness.record(child.kill(signal: SIGTERM))
            let error = try XCTUnwrap(try kill.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "ESRCH")
            XCTAssertTrue(error.message.contains("already exited"), error.message)
        }
    }

    /// A `.descriptor` that is not open is EBADF; a NUL inside an argument (a C string would end there) is EINVAL.
    func testAClosedDescriptorIsEBADFAndANulInAnArgumentIsEINVAL() throws {
        try checked { harness in
            var ends: [Int32] = [0, 0]
            XCTAssertEqual(pipe(&ends), 0)
            close(ends[0])
            close(ends[1])  // now surely not open (nothing else in this test opens descriptors)
            for descriptor in [ends[1], -1] {
                let spawn = try harness.record(ChildProcess.spawn("true", standardOutput: .descriptor(descriptor)))
                let error = try XCTUnwrap(try spawn.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EBADF")
                XCTAssertTrue(error.message.contains("descriptor \(descriptor)"), error.message)
                XCTAssertEqual(spawn.values.count, 0)
            }
            let spawn = try harness.record(ChildProcess.spawn("echo", arguments: ["cut\0here"]))
            let error = try XCTUnwrap(try spawn.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EINVAL")
            XCTAssertTrue(error.message.contains("NUL"), error.message)
            XCTAssertEqual(spawn.values.count, 0)
        }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(timeout: .seconds(30), body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

/// Writes `payload` to a pipe in chunks, sending more only while the pipe's queue is within `window`.
private final class StdinPump: @unchecked Sendable {
    // Loop thread only: `run()` and the write completions run there.
    let pipe: ChildPipe
    let payload: [UInt8]
    let window: Int
    let chunk: Int
    var offset = 0
    var closed = false
    var maxQueued = 0
    var failure: (any Error)?

    init(_ pipe: ChildPipe, payload: [UInt8], window: Int, chunk: Int) {
        self.pipe = pipe
        self.payload = payload
        self.window = window
        self.chunk = chunk
    }

    func run() {
        while offset < payload.count {
            // Backpressure: a flush of a queued write calls `run()` again.
            if pipe.queuedWriteByteCount > window { return }
            let end = min(offset + chunk, payload.count)
            let piece = Array(payload[offset..<end])
            offset = end
            pipe.send(piece) { [self] error in
                if let error { failure = failure ?? error } else { run() }
            }
            maxQueued = max(maxQueued, pipe.queuedWriteByteCount)
        }
        if !closed {
            closed = true
            pipe.close()  // EOF to cat after the last byte, which ends its output
        }
    }
}

/// The signals pending for `pid` (process-wide and thread), as a mask (bit N-1 for signal N).
private func pendingSignals(_ pid: Int32) throws -> UInt64 {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    var mask: UInt64 = 0
    for line in status.split(separator: "\n") where line.hasPrefix("SigPnd:") || line.hasPrefix("ShdPnd:") {
        mask |= UInt64(line.split(separator: "\t").last ?? "", radix: 16) ?? 0
    }
    return mask
}

/// The bytes of every chunk among `events`, joined.
private func bytes(in events: [Event<[UInt8]>]) -> [UInt8] {
    events.flatMap { $0.value ?? [] }
}

/// Whether `pid` is a zombie (dead, not yet reaped).
private func isZombie(_ pid: Int32) -> Bool {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
    return status.split(separator: ")").last?.split(separator: " ").first == "Z"
}

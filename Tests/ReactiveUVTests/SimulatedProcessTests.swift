import Glibc
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `ChildProcess.spawn` and `run` on a simulation: programs given as closures, their pipes,
/// exits, signals and crashes on virtual time.
final class SimulatedProcessTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// `wc -c`: counts its input, prints the count at EOF, exits 0.
    private func addWordCount(_ simulation: Simulation, at path: String = "/usr/bin/wc") throws {
        try simulation.addProgram(path) { child in
            child.lifetime.add(child.standardInput.aggregate(0) { $0 + $1.count }.subscribeNext { count in
                child.write("\(count)\n")
                child.exit(status: 0)
            })
        }
    }

    func testAProgramReadsItsInputWritesItsOutputAndExitsThroughTheUnchangedProcessAPI() throws {
        Simulation.check(seed: 101) { simulation in
            try addWordCount(simulation)
            let run = try simulation.record(ChildProcess.run("wc", arguments: ["-c"], input: Array("hello world\n".utf8)))
            simulation.runUntilIdle()
            XCTAssertEqual(run.values, [.started(pid: 1001), .standardOutput(Array("12\n".utf8)),
                                        .exited(ProcessExit(status: 0, signal: 0))])
            guard case .completed? = run.terminal else { return XCTFail("\(run.recorded)") }
            XCTAssertEqual(run.recorded.map(\.time), Array(repeating: ms(0), count: 4), "pipes take no virtual time")
            XCTAssertEqual(simulation.childrenSpawned, 1)
        }
    }

    func testAnUnknownExecutableFailsTheSpawnWithENOENTAndABareNameFindsAPath() throws {
        Simulation.check(seed: 102) { simulation in
            try addWordCount(simulation, at: "/opt/tools/bin/wc")
            let missing = try simulation.record(ChildProcess.spawn("/usr/bin/nothing-here"))
            let byPath = try simulation.record(ChildProcess.run("/usr/bin/wc"))
            let byName = try simulation.record(ChildProcess.run("wc", input: [1, 2]))
            simulation.runUntilIdle()
            let error = missing.terminal?.error as? UVError
            XCTAssertEqual(error?.code, UVError.noSuchFileCode)
            XCTAssertEqual(error?.context, "spawn /usr/bin/nothing-here")
            XCTAssertEqual((byPath.terminal?.error as? UVError)?.code, UVError.noSuchFileCode, "a path is matched as given")
            XCTAssertEqual(byName.values.dropFirst(), [.standardOutput(Array("2\n".utf8)), .exited(ProcessExit(status: 0, signal: 0))])
            XCTAssertEqual(simulation.childrenSpawned, 1, "a failed spawn starts no child")
        }
    }

    func testTheProgramSeesItsArgumentsEnvironmentAndDirectoryAndWritesBothOutputs() throws {
        Simulation.check(seed: 103) { simulation in
            try simulation.addProgram("/bin/echo") { child in
                child.write(child.arguments.joined(separator: " ") + "\n")
                child.writeError("\(child.environment ?? [:]) in \(child.workingDirectory ?? "-")\n")
                child.exit(status: 4)
            }
            let run = try simulation.record(ChildProcess.run("/bin/echo", arguments: ["a", "b"], environment: ["K": "V"],
                                                             workingDirectory: "/srv"))
            simulation.runUntilIdle()
            XCTAssertEqual(run.values, [.started(pid: 1001), .standardOutput(Array("a b\n".utf8)),
                                        .standardError(Array("[\"K\": \"V\"] in /srv\n".utf8)),
                                        .exited(ProcessExit(status: 4, signal: 0))])
            guard case .completed? = run.terminal else { return XCTFail("\(run.recorded)") }
        }
    }

    /// A program that ends at `after` on a timer unless something kills it first.
    private func addSleeper(_ simulation: Simulation, trapping trapped: [Int32] = [], after: Duration = .seconds(10)) throws {
        try simulation.addProgram("/bin/sleep") { child in
            child.lifetime.add(child.loop.schedule(after: after) { child.exit(status: 0) })
            if !trapped.isEmpty {
                child.lifetime.add(child.signals(trapped).subscribeNext { number in child.write("caught \(number)\n") })
            }
        }
    }

    func testKillTakesTheSignalsDefaultActionUnlessTheProgramWatchesIt() throws {
        Simulation.check(seed: 104) { simulation in
            try addSleeper(simulation, trapping: [SIGTERM], after: .milliseconds(50))
            let child = try simulation.record(ChildProcess.spawn("/bin/sleep", standardOutput: .pipe).flatMap { child in
                _ = child.loop.schedule(after: .milliseconds(10)) { child.kill(signal: SIGTERM) }
                _ = child.loop.schedule(after: .milliseconds(20)) { child.kill(signal: SIGUSR1) }
                return child.output.merge(with: child.exit.map { ProcessOutput.exited($0) })
            })
            simulation.runUntilIdle()
            XCTAssertEqual(child.values, [.standardOutput(Array("caught 15\n".utf8)), .exited(ProcessExit(status: 0, signal: SIGUSR1))])
            XCTAssertEqual(child.recorded.map(\.time).first, ms(10))
            XCTAssertEqual(child.recorded.last?.time, ms(20), "SIGUSR1 kills by default, before the program's own exit at 50 ms")
        }
    }

    func testAKillAfterTheExitFailsWithESRCHAndSendsNothing() throws {
        Simulation.check(seed: 105) { simulation in
            try addSleeper(simulation, after: .milliseconds(5))
            let kill = try simulation.record(ChildProcess.spawn("/bin/sleep").flatMap { child in
                child.exit.flatMap { _ in child.kill(signal: SIGKILL) }
            })
            simulation.runUntilIdle()
            XCTAssertEqual((kill.terminal?.error as? UVError)?.code, UVError(code: -ESRCH).code)
        }
    }

    func testDisposingARunningChildSendsSIGTERMThenSIGKILLAfterTheGraceOnVirtualTime() throws {
        Simulation.check(seed: 106) { simulation in
            try addSleeper(simulation, trapping: [SIGTERM])
            let spawn = try simulation.record(ChildProcess.spawn("/bin/sleep", standardOutput: .ignore, killGrace: .milliseconds(300)))
            simulation.run(for: .milliseconds(100))
            guard let child = spawn.values.first else { return XCTFail("\(spawn.recorded)") }
            let exit = try simulation.record(child.exit)
            spawn.dispose()
            simulation.runUntilIdle()
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGKILL)], "SIGTERM was caught, SIGKILL cannot be")
            XCTAssertEqual(exit.recorded.first?.time, ms(400))
        }
    }

    func testAChildWritingToAPipeWhoseReaderClosedDiesOfSIGPIPE() throws {
        Simulation.check(seed: 107) { simulation in
            try simulation.addProgram("/usr/bin/yes") { child in
                child.lifetime.add(Signal<Int>.interval(.milliseconds(10), on: child.loop).subscribeNext { _ in child.write("y\n") })
            }
            let exit = try simulation.record(ChildProcess.spawn("/usr/bin/yes").flatMap { child in
                let output = child.standardOutput
                output?.bytes.take(2).subscribe(completed: { output?.close() })
                return child.exit
            })
            simulation.runUntilIdle()
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGPIPE)])
            XCTAssertEqual(exit.recorded.first?.time, ms(30), "the third write finds the reader gone")
        }
    }

    func testAParentWritingToAChildThatExitedGetsEPIPE() throws {
        Simulation.check(seed: 108) { simulation in
            try simulation.addProgram("/bin/true") { child in child.exit(status: 0) }
            let write = try simulation.record(ChildProcess.spawn("/bin/true").flatMap { child in
                child.exit.flatMap { _ in child.standardInput!.write([1, 2, 3]) }
            })
            simulation.runUntilIdle()
            XCTAssertEqual((write.terminal?.error as? UVError)?.code, UVError(code: -EPIPE).code)
        }
    }

    func testAChildThatNeverExitsIsReportedOpenByTheLeakCheck() throws {
        Simulation.checkReportingProblems(seed: 109) { simulation in
            try addSleeper(simulation, after: .seconds(3_600))
            let spawn = try simulation.record(ChildProcess.spawn("/bin/sleep", standardInput: .ignore, standardOutput: .ignore,
                                                                 standardError: .ignore, detached: true))
            simulation.run(for: .seconds(1))
            XCTAssertEqual(spawn.values.map(\.pid), [1001])
            spawn.dispose()
            simulation.run(for: .seconds(1))
            let report = simulation.finish()
            XCTAssertTrue(report.leakedHandles.contains { $0.label == "process /bin/sleep (pid 1001) from ChildProcess.spawn (simulated)" },
                          "\(report.leakedHandles)")
        }
    }

    func testAChildWhoseOutputIsInheritedWritesIntoTheSimulationsStandardOutput() throws {
        Simulation.check(seed: 110) { simulation in
            try simulation.addProgram("/bin/echo") { child in
                child.lifetime.add(child.loop.schedule(after: .milliseconds(7)) {
                    child.write("out\n")
                    child.writeError("err\n")
                    child.exit(status: 0)
                })
            }
            let run = try simulation.record(ChildProcess.spawn("/bin/echo", standardOutput: .inherit, standardError: .inherit))
            simulation.runUntilIdle()
            guard case .completed? = run.terminal else { return XCTFail("\(run.recorded)") }
            XCTAssertEqual(simulation.standardOutput.map(\.text), ["out\n"])
            XCTAssertEqual(simulation.standardOutput.map(\.time), [ms(7)])
            XCTAssertEqual(simulation.standardErrorText, "err\n")
        }
    }

    func testAChildOnAnotherDescriptorOfThisProcessIsRefusedWithENOTSUP() throws {
        Simulation.check(seed: 111) { simulation in
            try addSleeper(simulation)
            let spawn = try simulation.record(ChildProcess.spawn("/bin/sleep", standardOutput: .descriptor(2)))
            simulation.runUntilIdle()
            let error = spawn.terminal?.error as? UVError
            XCTAssertEqual(error?.code, UVError.notSupported.code)
            XCTAssertEqual(simulation.childrenSpawned, 0)
        }
    }

    func testKillGroupOfADetachedChildReachesOnlyTheSimulatedChild() throws {
        Simulation.check(seed: 112) { simulation in
            try addSleeper(simulation)
            let exit = try simulation.record(ChildProcess.spawn("/bin/sleep", detached: true).flatMap { child in
                child.killGroup(signal: SIGINT).then(child.exit)
            })
            simulation.runUntilIdle()
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGINT)])
        }
    }

    func testALoopShutdownKillsARunningChildAndFailsItsExitWithShutDown() throws {
        Simulation.check(seed: 113) { simulation in
            let killed = Locked<ProcessExit?>(nil)
            try simulation.addProgram("/usr/sbin/daemon") { child in
                child.lifetime.add(ActionDisposable { killed.withLock { $0 = child.exitStatus } })
                child.lifetime.add(child.standardInput.subscribeNext { _ in })
            }
            let spawn = try simulation.record(ChildProcess.spawn("/usr/sbin/daemon"))
            simulation.run(for: .milliseconds(5))
            guard let child = spawn.values.first else { return XCTFail("\(spawn.recorded)") }
            let exit = try simulation.perform { EventRecorder(child.exit) }
            try simulation.perform { simulation.loop.shutdown() }
            simulation.runUntilIdle()
            XCTAssertEqual(killed.current, ProcessExit(status: 0, signal: SIGKILL))
            XCTAssertEqual(exit.terminal?.error as? EventLoopError, EventLoopError.shutDown(loop: "sim"))
            XCTAssertEqual(simulation.finish().loopCloseResult, 0)
        }
    }

    func testAProgramsBadSignalNumbersAreEINVALOrAProblemNeverACrash() throws {
        let problems = Simulation.checkReportingProblems(seed: 114) { simulation in
            let watched = Locked<[Event<Int32>]>([])
            try simulation.addProgram("/bin/bad") { child in
                child.lifetime.add(child.signals([SIGTERM, SIGKILL]).subscribe(next: { watched.append(.next($0)) },
                                                                               error: { watched.append(.error($0)) }))
                child.die(signal: 99)
            }
            let exit = try simulation.record(ChildProcess.spawn("/bin/bad").flatMap { $0.exit })
            simulation.runUntilIdle()
            XCTAssertEqual((watched.current.first?.error as? UVError)?.code, UVError.invalidArgumentCode)
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGKILL)])
        }.problems
        XCTAssertEqual(problems, ["simulated child /bin/bad (pid 1001) was told to die by signal 99, outside 1...64: it died by SIGKILL"])
    }

    func testAFinishedSimulationLetsItsLoopGoThoughAProgramAndAWriterHeldIt() throws {
        weak var released: EventLoop?
        Simulation.check(seed: 115) { simulation in
            released = simulation.loop
            try simulation.addProgram("/bin/time") { child in
                child.write("\(simulation.now)")
                child.exit(status: 0)
            }
            let run = try simulation.record(ChildProcess.run("/bin/time").ignoreValues())
            try simulation.perform { StandardIO.output.send("x") }
            simulation.runUntilIdle()
            guard case .completed? = run.terminal else { return XCTFail("\(run.recorded)") }
        }
        XCTAssertNil(released, "the loop outlived its simulation")
    }

    func testAnAsyncProgramReadsLinesWritesAndExitsWithItsReturnedStatus() throws {
        Simulation.check(seed: 116) { simulation in
            try simulation.addProgram("/usr/bin/tr", running: { child in
                for try await line in child.standardInput.lines().values {
                    child.write(String(decoding: line, as: UTF8.self).uppercased() + "\n")
                }
                return 3
            })
            struct Refused: Error, CustomStringConvertible { var description: String { "refused" } }
            try simulation.addProgram("/bin/false", running: { _ in throw Refused() })
            let upper = try simulation.record(ChildProcess.run("tr", input: Array("ab\ncd\n".utf8)))
            let failing = try simulation.record(ChildProcess.run("false"))
            simulation.runUntilIdle()
            let output = upper.values.compactMap { event -> [UInt8]? in
                if case .standardOutput(let bytes) = event { return bytes } else { return nil }
            }
            XCTAssertEqual(String(decoding: output.joined(), as: UTF8.self), "AB\nCD\n")
            XCTAssertEqual(upper.values.last, .exited(ProcessExit(status: 3, signal: 0)))
            XCTAssertEqual(failing.values.dropFirst(), [.standardError(Array("refused\n".utf8)), .exited(ProcessExit(status: 1, signal: 0))])
        }
    }

    func testAnAsyncProgramKilledWhileItWaitsIsCancelled() throws {
        Simulation.check(seed: 117) { simulation in
            let cancelled = Locked(false)
            try simulation.addProgram("/bin/cat", running: { child in
                for try await _ in child.standardInput.values {}
                cancelled.withLock { $0 = Task.isCancelled }
                return 0
            })
            let exit = try simulation.record(ChildProcess.spawn("/bin/cat").flatMap { child in
                child.kill(signal: SIGTERM).then(child.exit)
            })
            simulation.runUntilIdle()
            XCTAssertEqual(exit.values, [ProcessExit(status: 0, signal: SIGTERM)])
            XCTAssertTrue(cancelled.current, "the program's task was cancelled when the child died")
        }
    }
}

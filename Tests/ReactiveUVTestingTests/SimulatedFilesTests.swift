import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `Files` on a simulated loop: the simulation's in-memory tree answers each call as one callback
/// of the loop, on virtual time, with the result codes a real file system gives.
final class SimulatedFilesTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// Subscribes to `signal` on the simulation's loop and runs until idle: its values and its error.
    private func outcome<Value>(_ signal: Signal<Value>, _ simulation: Simulation) throws -> (values: [Value], error: UVError?) {
        let recorder = try simulation.record(signal)
        simulation.runUntilIdle()
        guard let terminal = recorder.terminal else {
            XCTFail("\(signal) did not end")
            return (recorder.values, nil)
        }
        if case .completed = terminal { return (recorder.values, nil) }
        return (recorder.values, terminal.error as? UVError)
    }

    func testStatLstatExistsAndAccessAnswerFromTheTreeOnVirtualTime() throws {
        Simulation.check(seed: 41) { simulation in
            XCTAssertNil(try outcome(Files.createDirectory("/data/logs", withParents: true), simulation).error)
            simulation.run(for: .milliseconds(5))
            XCTAssertNil(try outcome(Files.write(Array("hello".utf8), to: "/data/logs/a.log"), simulation).error)
            XCTAssertNil(try outcome(Files.symbolicLink(at: "/data/current", pointingTo: "logs/a.log"), simulation).error)

            let stat = try outcome(Files.stat("/data/current"), simulation)
            XCTAssertEqual(stat.values.first?.type, .regular, "stat follows the link")
            XCTAssertEqual(stat.values.first?.size, 5)
            XCTAssertEqual(stat.values.first?.permissions, 0o644, "0666 less the umask 022")
            XCTAssertEqual(stat.values.first?.modificationTime, .milliseconds(5), "stamped with the virtual time of the write")
            let lstat = try outcome(Files.lstat("/data/current"), simulation)
            XCTAssertEqual(lstat.values.first?.type, .symbolicLink)
            XCTAssertEqual(lstat.values.first?.size, UInt64("logs/a.log".utf8.count))
            XCTAssertEqual(try outcome(Files.stat("/data/logs"), simulation).values.first?.permissions, 0o755)

            XCTAssertEqual(try outcome(Files.exists("/data/logs/a.log"), simulation).values, [true])
            XCTAssertEqual(try outcome(Files.exists("/data/logs/b.log"), simulation).values, [false])
            XCTAssertEqual(try outcome(Files.exists(""), simulation).values, [false])
            XCTAssertEqual(try outcome(Files.stat("/data/missing"), simulation).error, .noSuchFile)
            XCTAssertEqual(try outcome(Files.stat("/data/logs/a.log/x"), simulation).error, .notDirectory)
            XCTAssertEqual(try outcome(Files.stat("/data/missing"), simulation).error?.context, "stat /data/missing")

            XCTAssertNil(try outcome(Files.access("/data/logs/a.log", [.read, .write]), simulation).error)
            XCTAssertNil(try outcome(Files.chmod("/data/logs/a.log", 0o444), simulation).error)
            XCTAssertEqual(try outcome(Files.access("/data/logs/a.log", .write), simulation).error, .permissionDenied)
            XCTAssertEqual(try outcome(Files.write([1], to: "/data/logs/a.log"), simulation).error, .permissionDenied)
            XCTAssertEqual(try outcome(Files.access("/data/logs/a.log", .execute), simulation).error, .permissionDenied)

            XCTAssertNil(try outcome(Files.symbolicLink(at: "/loop", pointingTo: "/loop"), simulation).error)
            XCTAssertEqual(try outcome(Files.stat("/loop"), simulation).error, .tooManySymbolicLinks)
            XCTAssertEqual(simulation.now, ms(5), "every answer is one callback at the time it was asked")
        }
    }

    func testAProgramsWritesAndReadsRoundTripThroughTheTree() throws {
        Simulation.check(seed: 42) { simulation in
            // A program that appends a line every 10 ms, then reads the file back.
            let lines = Signal<Int>.interval(.milliseconds(10)).take(3)
                .flatMap(maxConcurrent: 1) { index in Files.write(Array("line \(index)\n".utf8), to: "/log.txt", append: true) }
                .collect()
                .flatMap(maxConcurrent: 1) { _ in Files.read("/log.txt") }
            let recorder = try simulation.record(lines)
            simulation.runUntilIdle()
            XCTAssertEqual(recorder.values.map { String(decoding: $0, as: UTF8.self) }, ["line 0\nline 1\nline 2\n"])
            XCTAssertEqual(recorder.recorded.map(\.time), [ms(30), ms(30)], "the read follows the last write at once")

            XCTAssertNil(try outcome(Files.write(Array("new".utf8), to: "/log.txt"), simulation).error)
            XCTAssertEqual(try outcome(Files.read("/log.txt"), simulation).values, [Array("new".utf8)], "without append: replaced")
            XCTAssertEqual(try outcome(Files.read("/log.txt", maxSize: 2), simulation).error, .fileTooLarge)
            XCTAssertEqual(try outcome(Files.read("/"), simulation).error, .isDirectory)
            XCTAssertEqual(try outcome(Files.write([1], to: "/"), simulation).error, .isDirectory)
            XCTAssertEqual(try outcome(Files.read("/none"), simulation).error, .noSuchFile)
            XCTAssertEqual(try outcome(Files.chunks("/log.txt", chunkSize: 2), simulation).values, [Array("ne".utf8), Array("w".utf8)])
            XCTAssertEqual(try outcome(Files.chunks("/"), simulation).error, .isDirectory)
            XCTAssertEqual(try outcome(Files.write([1], to: "/none/file"), simulation).error, .noSuchFile)
        }
    }

    func testDirectoriesAreMadeListedAndRemovedWithRealCodes() throws {
        Simulation.check(seed: 43) { simulation in
            XCTAssertNil(try outcome(Files.createDirectory("/a"), simulation).error)
            XCTAssertEqual(try outcome(Files.createDirectory("/a"), simulation).error, .fileExists)
            XCTAssertEqual(try outcome(Files.createDirectory("/x/y"), simulation).error, .noSuchFile, "no parents without withParents")
            XCTAssertNil(try outcome(Files.createDirectory("/a/b/c", withParents: true), simulation).error)
            XCTAssertNil(try outcome(Files.createDirectory("/a/b/c", withParents: true), simulation).error, "mkdir -p: existing is fine")
            XCTAssertNil(try outcome(Files.write([1, 2], to: "/a/f"), simulation).error)
            XCTAssertEqual(try outcome(Files.createDirectory("/a/f/g", withParents: true), simulation).error, .notDirectory)
            XCTAssertEqual(try outcome(Files.createDirectory("/a/f", withParents: true), simulation).error, .fileExists)

            XCTAssertEqual(try outcome(Files.list("/a"), simulation).values,
                           [DirectoryEntry(name: "b", type: .directory), DirectoryEntry(name: "f", type: .regular)])
            XCTAssertEqual(try outcome(Files.list("/a/f"), simulation).error, .notDirectory)
            XCTAssertEqual(try outcome(Files.list("/nowhere"), simulation).error, .noSuchFile)

            XCTAssertEqual(try outcome(Files.removeDirectory("/a/b"), simulation).error, .directoryNotEmpty)
            XCTAssertEqual(try outcome(Files.removeDirectory("/a/f"), simulation).error, .notDirectory)
            XCTAssertEqual(try outcome(Files.remove("/a/b"), simulation).error, .isDirectory)
            XCTAssertEqual(try outcome(Files.remove("/a/none"), simulation).error, .noSuchFile)
            XCTAssertNil(try outcome(Files.removeDirectory("/a/b/c"), simulation).error)
            XCTAssertNil(try outcome(Files.remove("/a/f"), simulation).error)
            XCTAssertEqual(try outcome(Files.list("/a"), simulation).values, [DirectoryEntry(name: "b", type: .directory)])
            XCTAssertNil(try outcome(Files.createDirectory("/a/b/d/e", withParents: true), simulation).error)
            XCTAssertNil(try outcome(Files.removeTree("/a"), simulation).error)
            XCTAssertEqual(try outcome(Files.exists("/a"), simulation).values, [false])
            XCTAssertEqual(try outcome(Files.removeTree("/a"), simulation).error, .noSuchFile)
            XCTAssertEqual(try outcome(Files.removeDirectory("/"), simulation).error, .busy)

            XCTAssertNil(try outcome(Files.createDirectory("/locked", mode: 0o555), simulation).error)
            XCTAssertEqual(try outcome(Files.createDirectory("/locked/in"), simulation).error, .permissionDenied)
            XCTAssertEqual(try outcome(Files.write([1], to: "/locked/f"), simulation).error, .permissionDenied)
        }
    }

    func testRenameAndLinksFollowLinuxRules() throws {
        Simulation.check(seed: 44) { simulation in
            XCTAssertNil(try outcome(Files.createDirectory("/d/e", withParents: true), simulation).error)
            XCTAssertNil(try outcome(Files.createDirectory("/empty"), simulation).error)
            XCTAssertNil(try outcome(Files.write(Array("one".utf8), to: "/one"), simulation).error)
            XCTAssertNil(try outcome(Files.write(Array("two".utf8), to: "/two"), simulation).error)

            XCTAssertNil(try outcome(Files.rename(from: "/one", to: "/two"), simulation).error, "a file replaces a file")
            XCTAssertEqual(try outcome(Files.read("/two"), simulation).values, [Array("one".utf8)])
            XCTAssertEqual(try outcome(Files.exists("/one"), simulation).values, [false])
            XCTAssertEqual(try outcome(Files.rename(from: "/two", to: "/d"), simulation).error, .isDirectory)
            XCTAssertEqual(try outcome(Files.rename(from: "/d", to: "/two"), simulation).error, .notDirectory)
            XCTAssertEqual(try outcome(Files.rename(from: "/empty", to: "/d"), simulation).error, .directoryNotEmpty)
            XCTAssertEqual(try outcome(Files.rename(from: "/d", to: "/d/e/f"), simulation).error, .invalidArgument)
            XCTAssertEqual(try outcome(Files.rename(from: "/none", to: "/x"), simulation).error, .noSuchFile)
            XCTAssertNil(try outcome(Files.rename(from: "/d", to: "/empty"), simulation).error, "a directory replaces an empty one")
            XCTAssertEqual(try outcome(Files.list("/empty"), simulation).values, [DirectoryEntry(name: "e", type: .directory)])

            XCTAssertNil(try outcome(Files.symbolicLink(at: "/link", pointingTo: "empty/e"), simulation).error)
            XCTAssertEqual(try outcome(Files.symbolicLink(at: "/link", pointingTo: "x"), simulation).error, .fileExists)
            XCTAssertEqual(try outcome(Files.readLink("/link"), simulation).values, ["empty/e"])
            XCTAssertEqual(try outcome(Files.readLink("/two"), simulation).error, .invalidArgument)
            XCTAssertEqual(try outcome(Files.readLink("/none"), simulation).error, .noSuchFile)
            XCTAssertNil(try outcome(Files.write(Array("via link".utf8), to: "/link/inner"), simulation).error)
            XCTAssertEqual(try outcome(Files.read("/empty/e/inner"), simulation).values, [Array("via link".utf8)])
            XCTAssertNil(try outcome(Files.symbolicLink(at: "/dangling", pointingTo: "/nowhere"), simulation).error)
            XCTAssertEqual(try outcome(Files.exists("/dangling"), simulation).values, [false], "a dangling link does not count")
            XCTAssertNil(try outcome(Files.remove("/link"), simulation).error, "unlink removes the link, not its target")
            XCTAssertEqual(try outcome(Files.exists("/empty/e/inner"), simulation).values, [true])
        }
    }

    func testNoSpaceFromThePlanSurfacesAsTheNamedError() throws {
        let plan: [SimulationFault] = [.noSpace(path: "/data.bin", at: .milliseconds(20))]
        Simulation.check(seed: 45, faultPlan: plan) { simulation in
            let writes = Signal<Int>.interval(.milliseconds(10)).take(3)
                .flatMap(maxConcurrent: 1) { index in Files.write([UInt8(index)], to: "/data.bin", append: true).then(Signal.return(index)) }
            let recorder = try simulation.record(writes)
            simulation.runUntilIdle()
            XCTAssertEqual(recorder.values, [0], "the write at 10 ms lands, the one at 20 ms fails")
            XCTAssertEqual(recorder.terminal?.error as? UVError, .noSpace)
            XCTAssertEqual((recorder.terminal?.error as? UVError)?.context, "write /data.bin")
            XCTAssertEqual(recorder.recorded.last?.time, ms(20))
            XCTAssertEqual(simulation.injectedFaults, plan, "given back as a plan it replays the run")
            XCTAssertEqual("\(plan[0])", #".noSpace(path: "/data.bin", at: .milliseconds(20))"#)
            let recorderAfter = try simulation.record(Files.write([9], to: "/data.bin", append: true))
            simulation.runUntilIdle()
            XCTAssertEqual(recorderAfter.terminal.map { "\($0)" }, "completed", "the fault strikes once")
        }
    }

    func testOpenAndReadFaultsFromThePlanStrikeOnce() throws {
        let plan: [SimulationFault] = [.tooManyOpenFiles(path: "/f", at: .zero), .readError(path: "/f", at: .zero)]
        Simulation.check(seed: 46, faultPlan: plan) { simulation in
            XCTAssertEqual(try outcome(Files.write([1], to: "/f"), simulation).error, .tooManyOpenFiles)
            XCTAssertNil(try outcome(Files.write([1], to: "/f"), simulation).error)
            XCTAssertEqual(try outcome(Files.read("/f"), simulation).error, .ioError)
            XCTAssertEqual(try outcome(Files.read("/f"), simulation).values, [[1]])
            XCTAssertThrowsError(try Simulation(seed: 1, faultPlan: [.noSpace(path: "", at: .zero)])) { error in
                XCTAssertTrue("\(error)".contains("a file fault needs a path"), "\(error)")
            }
        }
    }

    func testFileFaultsDrawnFromTheSeedReplayAsAPlan() throws {
        // Twenty writes, one every 10 ms, each reported as done or as its error.
        let writes = Signal<Int>.interval(.milliseconds(10)).take(20).flatMap(maxConcurrent: 1) { index in
            Files.write([UInt8(index)], to: "/f\(index % 3)").then(Signal.return("ok"))
                .catch { error in Signal.return("\((error as? UVError)?.name ?? "?")") }
        }
        var outcomes: [String] = []
        var injected: [SimulationFault] = []
        let seededHash = Simulation.check(seed: 48) { simulation in
            try simulation.setFileFaults(SimulationFileFaults(noSpacePerMille: 300))
            let recorder = try simulation.record(writes)
            simulation.runUntilIdle()
            outcomes = recorder.values
            let failed = outcomes.filter { $0 != "ok" }
            XCTAssertFalse(failed.isEmpty, "at 300 in a thousand, some of twenty writes fail")
            XCTAssertTrue(failed.allSatisfy { $0 == "ENOSPC" }, "\(failed)")
            injected = simulation.injectedFaults
            XCTAssertEqual(injected.count, failed.count)
        }

        // The faults it drew, given back as a plan, fail the same writes.
        let replayHash = Simulation.check(seed: 48, faultPlan: injected) { replay in
            let again = try replay.record(writes)
            replay.runUntilIdle()
            XCTAssertEqual(again.values, outcomes)
        }
        XCTAssertEqual(replayHash, seededHash)
        XCTAssertThrowsError(try Simulation(seed: 1).setFileFaults(SimulationFileFaults(readErrorPerMille: 1001)))
    }

    func testADirectoryWatchHearsWhatInotifyWouldRaise() throws {
        Simulation.check(seed: 49) { simulation in
            XCTAssertNil(try outcome(Files.createDirectory("/w/sub", withParents: true), simulation).error)
            let events = try simulation.record(FileWatch.changes(at: "/w"))
            simulation.run(for: .milliseconds(1))
            XCTAssertNil(try outcome(Files.write(Array("a".utf8), to: "/w/a"), simulation).error)
            XCTAssertNil(try outcome(Files.write(Array("b".utf8), to: "/w/a", append: true), simulation).error)
            XCTAssertNil(try outcome(Files.chmod("/w/a", 0o600), simulation).error)
            XCTAssertNil(try outcome(Files.rename(from: "/w/a", to: "/w/b"), simulation).error)
            XCTAssertNil(try outcome(Files.rename(from: "/w/b", to: "/w/sub/b"), simulation).error)
            XCTAssertNil(try outcome(Files.write([1], to: "/w/sub/c"), simulation).error)
            XCTAssertNil(try outcome(Files.createDirectory("/w/d"), simulation).error)
            XCTAssertNil(try outcome(Files.removeDirectory("/w/d"), simulation).error)
            XCTAssertEqual(events.values.map(\.description),
                           ["renamed a", "changed a", "changed a", "changed a", "moved a -> b", "renamed b", "renamed d", "renamed d"],
                           "made, written, appended, chmod, moved within, moved out; nothing from the subdirectory")
            XCTAssertEqual(events.values.first?.path, "/w/a")
            XCTAssertEqual(events.values[4].oldPath, "/w/a")
            XCTAssertEqual(events.recorded.map(\.time), Array(repeating: ms(1), count: 8))
            XCTAssertEqual(try outcome(FileWatch.changes(at: "/none"), simulation).error, .noSuchFile)
        }
    }

    func testAFileSignalDisposedBeforeItsAnswerSendsNothing() throws {
        Simulation.check(seed: 47) { simulation in
            let recorder = try simulation.record(Files.write([1], to: "/x"))
            recorder.dispose()
            simulation.runUntilIdle()
            XCTAssertTrue(recorder.recorded.isEmpty)
        }
    }
}

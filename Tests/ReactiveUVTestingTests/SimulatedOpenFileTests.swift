import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `Files.open` and `OpenFile` on a simulated loop: each operation is one callback answered from the
/// simulation's in-memory tree, with the result codes Linux gives.
final class SimulatedOpenFileTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }

    /// Subscribes to `signal` on the simulation's loop and runs until idle: its values and its error.
    private func outcome<Value>(_ signal: Signal<Value>, _ simulation: Simulation,
                                line: UInt = #line) throws -> (values: [Value], error: UVError?) {
        let recorder = try simulation.record(signal)
        simulation.runUntilIdle()
        guard let terminal = recorder.terminal else {
            XCTFail("\(signal) did not end", line: line)
            return (recorder.values, nil)
        }
        if case .completed = terminal { return (recorder.values, nil) }
        return (recorder.values, terminal.error as? UVError)
    }

    /// Opens `path` and runs until the file is sent: the recorder of the open (it completes at the close) and the file.
    private func open(_ path: String, mode: OpenFile.Mode = .read, options: OpenFile.Options = [], _ simulation: Simulation,
                      line: UInt = #line) throws -> (EventRecorder<OpenFile>, OpenFile) {
        let recorder = try simulation.record(Files.open(path, mode: mode, options: options))
        simulation.runUntilIdle()
        return (recorder, try XCTUnwrap(recorder.values.first, "open \(path): \(recorder.recorded)", line: line))
    }

    /// Makes a temporary file in `directory` and runs until it is sent.
    private func open(temporaryIn directory: String, _ simulation: Simulation, line: UInt = #line) throws -> (EventRecorder<OpenFile>, OpenFile) {
        let recorder = try simulation.record(Files.makeTemporaryFile(in: directory))
        simulation.runUntilIdle()
        return (recorder, try XCTUnwrap(recorder.values.first, "mkstemp in \(directory): \(recorder.recorded)", line: line))
    }

    func testAnOpenFileReadsAndWritesAtOffsetsThenClosesAndSaysEBADF() throws {
        Simulation.check(seed: 61) { simulation in
            simulation.run(for: .milliseconds(3))
            let (opening, file) = try open("/data.bin", mode: .readWrite, options: [.create], simulation)
            XCTAssertEqual(try outcome(file.write(Array("hello".utf8), at: 0), simulation).values, [5])
            XCTAssertEqual(try outcome(file.write(Array("XY".utf8), at: 7), simulation).values, [2], "past the end: a gap of zeros")
            XCTAssertEqual(try outcome(file.read(at: 0, count: 100), simulation).values, [Array("hello".utf8) + [0, 0] + Array("XY".utf8)])
            XCTAssertEqual(try outcome(file.read(at: 3, count: 2), simulation).values, [Array("lo".utf8)])
            XCTAssertEqual(try outcome(file.read(at: 50, count: 2), simulation).values, [[]], "past the end: nothing")
            XCTAssertEqual(try outcome(file.append(Array("!".utf8)), simulation).values, [1])
            XCTAssertEqual(try outcome(file.size(), simulation).values, [10])
            XCTAssertEqual(try outcome(file.stat(), simulation).values.first?.modificationTime, .milliseconds(3))
            XCTAssertEqual(try outcome(file.chunks(from: 2, chunkSize: 3), simulation).values.map { String(decoding: $0, as: UTF8.self) },
                           ["llo", "\0\0X", "Y!"], "sequenced reads, in order, to the end")
            XCTAssertNil(try outcome(file.truncate(to: 4), simulation).error)
            XCTAssertNil(try outcome(file.sync(), simulation).error)
            XCTAssertEqual(try outcome(Files.read("/data.bin"), simulation).values, [Array("hell".utf8)], "the tree holds what the file wrote")
            XCTAssertEqual(simulation.files.openDescriptorCount, 1)

            XCTAssertNil(try outcome(file.close(), simulation).error)
            XCTAssertEqual(opening.terminal.map { "\($0)" }, "completed", "the open's subscription ends at the close")
            XCTAssertEqual(simulation.files.openDescriptorCount, 0)
            let afterClose = try outcome(file.read(at: 0, count: 1), simulation).error
            XCTAssertEqual(afterClose, .badFileDescriptor)
            XCTAssertEqual(afterClose?.message, "the file was closed by its close()")
            XCTAssertEqual(try outcome(file.close(), simulation).error, .badFileDescriptor)
            XCTAssertEqual(simulation.now, ms(3), "every answer is one callback at the time it was asked")
        }
    }

    func testOpenAnswersWithLinuxErrors() throws {
        Simulation.check(seed: 62) { simulation in
            XCTAssertNil(try outcome(Files.createDirectory("/d"), simulation).error)
            XCTAssertNil(try outcome(Files.write(Array("text".utf8), to: "/d/f"), simulation).error)
            XCTAssertEqual(try outcome(Files.open("/d/none"), simulation).error, .noSuchFile)
            XCTAssertEqual(try outcome(Files.open("/d/none"), simulation).error?.context, "open /d/none")
            XCTAssertEqual(try outcome(Files.open("/none/f", mode: .write, options: [.create]), simulation).error, .noSuchFile)
            XCTAssertEqual(try outcome(Files.open("/d/f/x"), simulation).error, .notDirectory)
            XCTAssertEqual(try outcome(Files.open("/d", mode: .write), simulation).error, .isDirectory)
            XCTAssertEqual(try outcome(Files.open("/d/f", mode: .write, options: [.create, .exclusive]), simulation).error, .fileExists)

            // A directory opens for reading, as on Linux; its reads fail with EISDIR.
            let (directoryOpen, directory) = try open("/d", simulation)
            XCTAssertEqual(try outcome(directory.read(at: 0, count: 1), simulation).error, .isDirectory)
            XCTAssertEqual(try outcome(directory.stat(), simulation).values.first?.type, .directory)
            directoryOpen.dispose()
            simulation.runUntilIdle()
            XCTAssertEqual(simulation.files.openDescriptorCount, 0, "disposing the open closes the file")

            // The open mode is enforced with the real EBADF's words.
            let (_, reader) = try open("/d/f", simulation)
            let refused = try outcome(reader.write([1], at: 0), simulation).error
            XCTAssertEqual(refused, .badFileDescriptor)
            XCTAssertEqual(refused?.message, "the file was opened for reading only (mode .read): a write needs .write or .readWrite")
            XCTAssertEqual(try outcome(reader.truncate(to: 0), simulation).error, .badFileDescriptor)
            let (_, writer) = try open("/d/f", mode: .write, options: [.append], simulation)
            XCTAssertEqual(try outcome(writer.read(at: 0, count: 1), simulation).error, .badFileDescriptor)
            XCTAssertEqual(try outcome(writer.write(Array("!".utf8), at: 0), simulation).values, [1])
            XCTAssertEqual(try outcome(reader.read(at: 0, count: 10), simulation).values, [Array("text!".utf8)], "append: at the end")
            let (_, truncating) = try open("/d/f", mode: .write, options: [.truncate], simulation)
            XCTAssertEqual(try outcome(reader.size(), simulation).values, [0], "truncate empties it at the open")
            XCTAssertNil(try outcome(truncating.close(), simulation).error)

            XCTAssertNil(try outcome(Files.chmod("/d/f", 0o200), simulation).error)
            XCTAssertEqual(try outcome(Files.open("/d/f"), simulation).error, .permissionDenied)
            XCTAssertNil(try outcome(Files.chmod("/d", 0o500), simulation).error)
            XCTAssertEqual(try outcome(Files.open("/d/g", mode: .write, options: [.create]), simulation).error, .permissionDenied)
            // What is still open is closed by the loop's shutdown at finish().
            XCTAssertEqual(simulation.files.openDescriptorCount, 2)
        }
    }

    func testAFileRenamedOverOrUnlinkedStaysReadableThroughItsOpenFile() throws {
        Simulation.check(seed: 63) { simulation in
            XCTAssertNil(try outcome(Files.write(Array("old".utf8), to: "/log"), simulation).error)
            let (_, file) = try open("/log", simulation)
            XCTAssertNil(try outcome(Files.write(Array("new".utf8), to: "/log.tmp"), simulation).error)
            XCTAssertNil(try outcome(Files.rename(from: "/log.tmp", to: "/log"), simulation).error)
            XCTAssertEqual(try outcome(file.read(at: 0, count: 10), simulation).values, [Array("old".utf8)], "still the old inode")
            XCTAssertEqual(try outcome(file.stat(), simulation).values.first?.linkCount, 0, "renamed over: unlinked")
            let (_, current) = try open("/log", simulation)
            XCTAssertEqual(try outcome(current.stat(), simulation).values.first?.linkCount, 1)
            XCTAssertNil(try outcome(Files.remove("/log"), simulation).error)
            XCTAssertEqual(try outcome(current.read(at: 0, count: 10), simulation).values, [Array("new".utf8)])
        }
    }

    func testOpenFileFaultsFromThePlanStrikeOnceWithTheirErrors() throws {
        let plan: [SimulationFault] = [
            .tooManyOpenFiles(path: "/f", at: .zero),
            .noSpace(path: "/f", at: .milliseconds(10)),
            .readError(path: "/f", at: .milliseconds(10)),
        ]
        Simulation.check(seed: 64, faultPlan: plan) { simulation in
            XCTAssertEqual(try outcome(Files.open("/f", mode: .readWrite, options: [.create]), simulation).error, .tooManyOpenFiles)
            XCTAssertEqual(try outcome(Files.exists("/f"), simulation).values, [false], "EMFILE comes before the file is made")
            let (_, file) = try open("/f", mode: .readWrite, options: [.create], simulation)
            XCTAssertEqual(try outcome(file.write([1, 2], at: 0), simulation).values, [2], "the ENOSPC is not due before 10 ms")
            simulation.run(for: .milliseconds(10))
            let full = try outcome(file.write([3], at: 2), simulation).error
            XCTAssertEqual(full, .noSpace)
            XCTAssertEqual(full?.context, "write /f")
            XCTAssertEqual(try outcome(file.read(at: 0, count: 10), simulation).error, .ioError)
            XCTAssertEqual(try outcome(file.read(at: 0, count: 10), simulation).values, [[1, 2]], "each fault strikes once; the failed write wrote nothing")
            XCTAssertEqual(simulation.injectedFaults, plan)
            XCTAssertEqual(simulation.finish().problems, [])
            XCTAssertEqual(simulation.files.openDescriptorCount, 0, "the shutdown closed the file")
        }
    }

    func testTemporaryFilesAreMadeWithNamesFromACountAndRemovedWhenUnwanted() throws {
        Simulation.check(seed: 67) { simulation in
            XCTAssertNil(try outcome(Files.createDirectory("/tmp"), simulation).error)
            let (_, first) = try open(temporaryIn: "/tmp", simulation)
            let (_, second) = try open(temporaryIn: "/tmp", simulation)
            XCTAssertEqual([first.path, second.path], ["/tmp/reactiveuv-baaaaa", "/tmp/reactiveuv-caaaaa"])
            XCTAssertEqual(try outcome(first.stat(), simulation).values.first?.permissions, 0o600)
            XCTAssertEqual(try outcome(first.write(Array("scratch".utf8), at: 0), simulation).values, [7])
            XCTAssertEqual(try outcome(Files.read(first.path), simulation).values, [Array("scratch".utf8)])
            XCTAssertEqual(try outcome(Files.makeTemporaryFile(in: "/none"), simulation).error, .noSuchFile)
            // One made for a subscriber disposed before it was sent is removed.
            let unwanted = try simulation.record(Files.makeTemporaryFile(in: "/tmp"))
            unwanted.dispose()
            simulation.runUntilIdle()
            XCTAssertEqual(try outcome(Files.list("/tmp"), simulation).values.map(\.name), ["reactiveuv-baaaaa", "reactiveuv-caaaaa"])
        }
    }

    func testWhatFilesReadIsDigestedIntoTheTrace() throws {
        func traceHash(_ text: String) -> UInt64 {
            Simulation.check(seed: 66) { simulation in
                XCTAssertNil(try outcome(Files.write(Array(text.utf8), to: "/f"), simulation).error)
                let (_, file) = try open("/f", simulation)
                XCTAssertEqual(try outcome(file.read(at: 0, count: 10), simulation).values, [Array(text.utf8)])
            }
        }
        XCTAssertNotEqual(traceHash("abc"), traceHash("abd"), "the same callbacks, other bytes read: another trace")
    }

    func testAsyncFormsRunOnTheSimulatedLoopsTask() throws {
        Simulation.check(seed: 65) { simulation in
            let loop = simulation.loop
            let seen = Locked<[String]>([])
            try simulation.perform {
                loop.task { _ in
                    do {
                        try await FileSystem.withOpenFile("/notes", mode: .readWrite, options: [.create]) { file in
                            try await FileSystem.write(Array("one two".utf8), to: file, at: 0)
                            try await FileSystem.append(Array(" three".utf8), to: file)
                            let bytes = try await FileSystem.read(file, at: 4, count: 100)
                            seen.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
                        }
                        let size = try await FileSystem.withOpenFile("/notes") { file in try await FileSystem.size(file) }
                        seen.withLock { $0.append("reopened: \(size) bytes") }
                        _ = try await FileSystem.withOpenFile("/missing") { _ in 0 }
                    } catch {
                        seen.withLock { $0.append("\(error)") }
                    }
                }
            }
            simulation.runUntilIdle()
            XCTAssertEqual(seen.current.first, "two three")
            XCTAssertEqual(seen.current.dropFirst().first, "reopened: 13 bytes")
            XCTAssertEqual(seen.current.last?.hasPrefix("ENOENT"), true, "\(seen.current)")
            XCTAssertEqual(simulation.files.openDescriptorCount, 0, "withOpenFile closed both files")
        }
    }
}

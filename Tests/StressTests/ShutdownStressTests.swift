import EchoServerKit
import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization
import XCTest

/// Counts one subscription's values and keeps how it ended.
final class Outcome: @unchecked Sendable {
    // `values` is atomic and `ending` locked; `subscription` is touched only on the loop thread.
    let name: String
    let values = Atomic<Int>(0)
    let ending = Locked<Result<Void, any Error>?>(nil)
    private var subscription: (any Disposable)?

    init(_ name: String) { self.name = name }

    /// Subscribes on the calling (loop) thread; `onValue` runs there too.
    func observe<Value>(_ signal: Signal<Value>, onValue: sending ((Value) -> Void)? = nil) {
        subscription = signal.subscribe(
            next: { [self] value in
                values.add(1, ordering: .relaxed)
                onValue?(value)
            },
            error: { [self] error in ending.withLock { $0 = .failure(error) } },
            completed: { [self] in ending.withLock { $0 = .success(()) } })
    }

    /// "completed", the error, or "no terminal event".
    var endingDescription: String {
        switch ending.current {
        case .success?: "completed"
        case .failure(let error)?: "\(error)"
        case nil: "no terminal event"
        }
    }

    /// Whether it ended with `EventLoopError.shutDown` for `loop`.
    func endedWithShutDown(of loop: String) -> Bool {
        if case .failure(let error)? = ending.current { return error as? EventLoopError == .shutDown(loop: loop) }
        return false
    }
}

/// Keeps writes of 16 KiB in flight on one connection (through `send(_:completion:)`)
/// and reads the echo, checking a few bytes of every chunk against the running pattern.
final class Pump: @unchecked Sendable {
    // Counters are atomic; `sentBytes`, `receivedBytes` and `connection` are touched only on the loop thread.
    let issued = Atomic<Int>(0)
    let completed = Atomic<Int>(0)
    let echoed = Atomic<Int>(0)
    let mismatches = Atomic<Int>(0)
    /// The connection, kept by the pump until the test lets go of it.
    var connection: TCPConnection?
    private var sentBytes = 0
    private var receivedBytes = 0
    private static let chunk = 16_384
    private static let source = (0..<(16_384 + 251)).map { UInt8($0 % 251) }

    /// Starts pumping on `connection` (loop thread).
    func start(_ connection: TCPConnection, reading: Outcome) {
        self.connection = connection
        reading.observe(connection.bytes) { [self] bytes in check(bytes) }
        sendNext(connection)
        sendNext(connection)
    }

    private func sendNext(_ connection: TCPConnection) {
        let phase = sentBytes % 251
        sentBytes += Pump.chunk
        issued.add(1, ordering: .relaxed)
        connection.send(Array(Pump.source[phase..<(phase + Pump.chunk)])) { [self] error in
            completed.add(1, ordering: .relaxed)
            if error == nil { sendNext(connection) }
        }
    }

    private func check(_ bytes: [UInt8]) {
        for offset in [0, bytes.count / 2, bytes.count - 1] where bytes[offset] != UInt8((receivedBytes + offset) % 251) {
            mismatches.add(1, ordering: .relaxed)
        }
        receivedBytes += bytes.count
        echoed.add(bytes.count, ordering: .relaxed)
    }
}

/// Shutting a loop down while it has live timers (plain, behind signals and behind
/// `delay`/`timeout`), file watches, an echo server and
/// clients in mid-stream (its own and raw sockets on other threads), a hundred times over
/// (`SHUTDOWN_ROUNDS`, or scaled by `STRESS_SCALE`, at least 3)
/// (every other time right after the server starts listening, with connects still in flight):
/// `shutdown()` returns, `uv_loop_close` returns 0, every subscriber is told
/// (`EventLoopError.shutDown`, or completion for timers that already fired), every
/// write's completion runs once, peers see the connection end, and the objects are freed.
final class ShutdownStressTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-shutdown-stress-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
        for name in ["a", "b", "c", "d"] { _ = FileManager.default.createFile(atPath: "\(directory)/\(name)", contents: nil) }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testShutdownWithTimersWatchesAndConnectionsMidStreamClosesEverything() throws {
        let rounds = environmentInt("SHUTDOWN_ROUNDS", default: scaled(100, minimum: 3))
        // A writer keeps the watches busy for the whole test (paced: one change per file per millisecond).
        let writing = Atomic<Bool>(true)
        let writerDone = Atomic<Bool>(false)
        let directory = self.directory
        spawn("file-writer") {
            var counter = 0
            while writing.load(ordering: .relaxed) {
                for name in ["a", "b", "c", "d"] {
                    if let handle = FileHandle(forWritingAtPath: "\(directory)/\(name)") {
                        handle.seekToEndOfFile()
                        handle.write(Data([UInt8(counter % 256)]))
                        handle.closeFile()
                    }
                }
                let entry = "\(directory)/sub/e\(counter % 8)"
                if counter % 16 < 8 {
                    _ = FileManager.default.createFile(atPath: entry, contents: nil)
                } else {
                    try? FileManager.default.removeItem(atPath: entry)
                }
                counter += 1
                usleep(1000)
            }
            writerDone.store(true, ordering: .releasing)
        }
        defer {
            writing.store(false, ordering: .relaxed)
            try? waitFor("the file writer to stop", timeout: .seconds(10)) { writerDone.load(ordering: .acquiring) }
        }

        var heapAfterFirstRound = 0
        let started = SchedulerInstant.now
        for round in 0..<rounds {
            let left = try runRound(round)
            // Nothing holds on to the loop or the connections once the round's objects are gone.
            XCTAssertNil(left.loop.value, "round \(round): the loop was not freed after shutdown")
            XCTAssertEqual(left.connections.filter { $0.value != nil }.count, 0,
                           "round \(round): connections not freed after shutdown")
            if round == 0 { heapAfterFirstRound = liveHeapBytes() }
        }
        let heapAtEnd = liveHeapBytes()
        // Each round opens ~50 handles and hundreds of objects; 2 MiB over 99 rounds is ~20 KiB per round.
        XCTAssertLessThan(heapAtEnd - heapAfterFirstRound, 2 << 20,
                          "the live heap grew from \(mebibytes(heapAfterFirstRound)) to \(mebibytes(heapAtEnd)) over \(rounds - 1) rounds")
        print("stress: \(rounds) shutdowns with timers, file watches and TCP connections mid-stream live, in \(formatted(SchedulerInstant.now - started)); "
              + "live heap after round 1 \(mebibytes(heapAfterFirstRound)), after round \(rounds) \(mebibytes(heapAtEnd))")
    }

    /// One round; returns weak references to what must be freed once the round's objects are gone.
    private func runRound(_ round: Int) throws -> (loop: Weak<EventLoop>, connections: [Weak<TCPConnection>]) {
        let name = "shutdown-stress-\(round)"
        let live = EventLoop(name: name)

        let intervals = (0..<10).map { Outcome("interval \($0)") }
        let pendingTimers = (0..<10).map { Outcome("timer(after: 1 h) \($0)") }
        let firedTimers = (0..<10).map { Outcome("timer(after: \($0) ms)") }
        let repeating = Atomic<Int>(0)
        let delayed = (0..<5).map { Outcome("interval.delay \($0)") }
        let timeouts = (0..<5).map { Outcome("never.timeout(1 h) \($0)") }
        let watches = ["a", "b", "c", "d"].map { Outcome("watch \($0)") } + [Outcome("watch dir"), Outcome("recursive watch")]
        let server = Outcome("echo server")
        let port = Atomic<Int>(0)
        let pumps = (0..<8).map { _ in Pump() }
        let connects = (0..<8).map { Outcome("TCP.connect \($0)") }
        let readers = (0..<8).map { Outcome("bytes \($0)") }
        let directory = self.directory

        live.execute {
            for (index, outcome) in intervals.enumerated() { outcome.observe(Signal<Int>.interval(.milliseconds(1 + index % 5))) }
            for outcome in pendingTimers { outcome.observe(Signal<Void>.timer(after: .seconds(3600))) }
            for (index, outcome) in firedTimers.enumerated() { outcome.observe(Signal<Void>.timer(after: .milliseconds(index))) }
            for _ in 0..<5 {
                _ = live.schedule(after: .zero, repeatingEvery: .milliseconds(2)) { repeating.add(1, ordering: .relaxed) }
            }
            for outcome in delayed { outcome.observe(Signal<Int>.interval(.milliseconds(1)).delay(.milliseconds(20))) }
            for outcome in timeouts { outcome.observe(Signal<Int>.never.timeout(.seconds(3600))) }
            for (index, name) in ["a", "b", "c", "d"].enumerated() { watches[index].observe(FileWatch.changes(at: "\(directory)/\(name)")) }
            watches[4].observe(FileWatch.changes(at: directory))
            watches[5].observe(FileWatch.changes(at: directory, recursive: true))
            server.observe(EchoServer.run(port: 0)) { @Sendable event in
                guard case .listening(let address) = event else { return }
                port.store(address.port, ordering: .releasing)
                for index in 0..<8 {
                    connects[index].observe(TCP.connect(host: "127.0.0.1", port: address.port)) { connection in
                        pumps[index].start(connection, reading: readers[index])
                    }
                }
            }
        }
        try waitFor("the echo server to listen", timeout: .seconds(10), observed: server.endingDescription) {
            port.load(ordering: .acquiring) != 0
        }

        // Raw clients on their own threads ping-pong 16 KiB messages until the server goes away.
        let rawCount = 6
        let rawEnds = Locked<[String]>([])
        let rawTrips = Locked([Int](repeating: 0, count: rawCount))  // round trips per raw client
        for index in 0..<rawCount {
            let serverPort = port.load(ordering: .acquiring)
            spawn("raw-client-\(index)") {
                let end: String
                do {
                    let client = try BlockingClient(port: serverPort, receiveTimeout: .seconds(20))
                    defer { client.close() }
                    let message = bytePattern(16_384, seed: index)
                    while true {
                        guard client.send(message) == message.count else { end = "send failed: errno \(errno)"; break }
                        do {
                            guard try client.receive(exactly: message.count) == message else { end = "echo differs"; break }
                        } catch {
                            end = "\(error)"
                            break
                        }
                        rawTrips.withLock { $0[index] += 1 }
                    }
                } catch {
                    end = "\(error)"
                }
                rawEnds.withLock { $0.append(end) }
            }
        }

        // Even rounds shut down mid-stream; odd rounds as soon as the server listens, with
        // connects, accepts and the first reads and timers still in flight.
        let midStream = round % 2 == 0
        if midStream {
            let busy = {
                intervals.allSatisfy { $0.values.load(ordering: .relaxed) >= 2 }
                    && firedTimers.allSatisfy { $0.ending.current != nil }
                    && repeating.load(ordering: .relaxed) >= 10
                    && delayed.allSatisfy { $0.values.load(ordering: .relaxed) >= 1 }
                    && watches.allSatisfy { $0.values.load(ordering: .relaxed) >= 1 }
                    && pumps.allSatisfy { $0.echoed.load(ordering: .relaxed) >= 65_536 }
                    && rawTrips.current.allSatisfy { $0 >= 2 }
            }
            try waitFor("every timer, watch and connection to be busy", timeout: .seconds(30),
                        observed: "watches \(watches.map { $0.values.load(ordering: .relaxed) }), "
                            + "echoed \(pumps.map { $0.echoed.load(ordering: .relaxed) }), "
                            + "raw round trips \(rawTrips.current), "
                            + "endings \((connects + readers + [server]).map(\.endingDescription))",
                        busy)
        }

        let report = try shutDown(live, timeout: .seconds(30))
        XCTAssertEqual(report.loopCloseResult, 0, "round \(round)")
        let kinds = Dictionary(grouping: report.closedHandles, by: \.kind).mapValues(\.count)
        // The seven watches (four files, the directory, the recursive watch's root and
        // subdirectory) share the loop's one inotify instance, read through one uv_poll handle.
        XCTAssertEqual(kinds["poll"], 1, "round \(round): \(kinds)")
        XCTAssertNil(kinds["fs_event"], "round \(round): \(kinds)")
        if midStream {
            // The listener, 8 accepted and 8 connected sockets, and the raw clients' accepted ones.
            XCTAssertEqual(kinds["tcp"], 1 + 8 + 8 + rawCount, "round \(round): \(kinds)")
            // Ten intervals, ten one-hour timers, five repeating schedules, five intervals and
            // five timeouts behind time operators were pending, and up to five delays.
            XCTAssertTrue((35...40).contains(kinds["timer"] ?? 0), "round \(round): \(kinds)")
        } else {
            XCTAssertGreaterThanOrEqual(kinds["tcp"] ?? 0, 1, "round \(round): \(kinds)")
            XCTAssertGreaterThanOrEqual(kinds["timer"] ?? 0, 35, "round \(round): \(kinds)")
        }

        // Every subscriber was told.
        let started = readers.enumerated().filter { pumps[$0.offset].connection != nil }.map(\.element)
        let shutDownEnded = watches + [server] + connects + started + intervals + pendingTimers + delayed + timeouts
        for outcome in shutDownEnded where !outcome.endedWithShutDown(of: name) {
            XCTFail("round \(round): \(outcome.name) ended with \(outcome.endingDescription), not EventLoopError.shutDown")
        }
        for outcome in firedTimers where !(outcome.endingDescription == "completed" || (!midStream && outcome.endedWithShutDown(of: name))) {
            XCTFail("round \(round): \(outcome.name) ended with \(outcome.endingDescription)")
        }
        for (index, pump) in pumps.enumerated() {
            XCTAssertEqual(pump.completed.load(ordering: .relaxed), pump.issued.load(ordering: .relaxed),
                           "round \(round), pump \(index): a write's completion did not run")
            XCTAssertEqual(pump.mismatches.load(ordering: .relaxed), 0, "round \(round), pump \(index): echoed bytes out of order")
        }
        // The raw peers see the connection end (EOF or reset; refused if it never got in), not a timeout.
        try waitFor("the raw clients to see the server go", timeout: .seconds(30), observed: "\(rawEnds.current)") {
            rawEnds.current.count == rawCount
        }
        let acceptable = midStream ? ["EOF", "errno 104", "errno 32"] : ["EOF", "errno 104", "errno 32", "errno 111"]
        for end in rawEnds.current where !acceptable.contains(where: { end.contains($0) }) {
            XCTFail("round \(round): a raw client ended with \(end)")
        }
        return (Weak(live), pumps.map { Weak($0.connection) })
    }
}

/// A weak reference, to check that an object was freed.
struct Weak<Object: AnyObject> {
    weak var value: Object?
    init(_ value: Object?) { self.value = value }
}

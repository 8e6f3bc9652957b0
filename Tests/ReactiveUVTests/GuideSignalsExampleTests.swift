import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the examples of docs/guides/signals.md compiling (each block equals the code between its markers
/// here) and runs them.
final class GuideSignalsExampleTests: XCTestCase {
    static let guide = "docs/guides/signals.md"

    private static func ticksExample() {
        // GUIDE-SIGNALS-TICKS-BEGIN
        // The calling thread becomes the loop's thread; run() drives it.
        let loop = EventLoop.onCurrentThread()

        let ticks = Signal<Int>.interval(.milliseconds(100)).named("ticks")
        let subscription = ticks.subscribe(next: { print("tick", $0) },
                                           completed: { print("done") })

        // A second signal stops the first after 350 ms.
        Signal<Void>.timer(after: .milliseconds(350)).subscribeNext { _ in
            subscription.dispose()
        }

        loop.run()  // returns once nothing is left to do, after ticks 0, 1, 2
        loop.shutdown()
        // GUIDE-SIGNALS-TICKS-END
    }

    func testTheTicksExampleIsThisCodeAndRuns() throws {
        try assertDocumentBlock(Self.guide, containing: "EventLoop.onCurrentThread()\n\nlet ticks", matches: "GUIDE-SIGNALS-TICKS")
        let start = SchedulerInstant.now
        onNewThread { GuideSignalsExampleTests.ticksExample() }
        XCTAssertGreaterThanOrEqual(SchedulerInstant.now - start, .milliseconds(350))
    }

    func testTheOperatorsExampleIsThisCodeAndWorks() throws {
        try assertDocumentBlock(Self.guide, containing: "Lifetime.make()", matches: "GUIDE-SIGNALS-OPERATORS")
        // GUIDE-SIGNALS-OPERATORS-BEGIN
        // A missing file is final; any other error is retried 3 times, 50, 100 and 200 ms apart.
        let settings = Files.read("/etc/reactiveuv-example/settings.json")
            .retry(upTo: 3, delay: .milliseconds(50), backoff: 2, while: { ($0 as? UVError) != .noSuchFile })

        // At most one progress line per 100 ms, the newest; it stops when the job's token goes.
        let (lifetime, token) = Lifetime.make()
        let progress = Signal<Int>.interval(.milliseconds(10))
            .take(during: lifetime)
            .throttle(.milliseconds(100), latest: true)
            .map { "progress \($0)" }
        // GUIDE-SIGNALS-OPERATORS-END

        XCTAssertThrowsError(try settings.first(timeout: .seconds(5))) { error in
            XCTAssertEqual(error as? UVError, .noSuchFile, "a missing file is not retried: \(error)")
        }
        let report = LoopHarness.run { harness in
            let lines = try harness.record(progress)
            try lines.waitForValues(2)
            token.dispose()
            XCTAssertEqual(try lines.waitForTermination(), .completed)
            XCTAssertEqual(lines.values.first, "progress 0", "the first tick goes at once")
            let times = lines.recorded.filter { !$0.event.isTerminating }.map(\.time.nanoseconds)
            for (earlier, later) in zip(times, times.dropFirst()) {
                XCTAssertGreaterThanOrEqual(later - earlier, 99_000_000, "two lines less than 100 ms apart: \(lines.timeline)")
            }
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    // GUIDE-SIGNALS-ERRORS-BEGIN
    // A missing file is the defaults; any other error, a timeout included, goes to the caller.
    func readSettings(at path: String) throws -> [UInt8] {
        do {
            return try Files.read(path).first(timeout: .seconds(5)) ?? []
        } catch UVError.noSuchFile {
            return []
        }
    }

    // In a signal's error closure, switch on the same patterns.
    func explain(_ error: any Error) -> String {
        switch error {
        case UVError.addressInUse: return "the port is taken"
        case UVError.connectionRefused, UVError.connectionReset: return "the peer is gone"
        case UVError.nameNotFound: return "no such host"
        case let timeout as TimeoutError: return "gave up: \(timeout)"  // "timed out after 5.0 seconds waiting for first()"
        default: return "\(error)"
        }
    }
    // GUIDE-SIGNALS-ERRORS-END

    func testTheErrorsExampleIsThisCodeAndWorks() throws {
        try assertDocumentBlock(Self.guide, containing: "func explain(", matches: "GUIDE-SIGNALS-ERRORS")

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("guide-errors-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let settings = directory.appendingPathComponent("settings").path
        XCTAssertEqual(try readSettings(at: settings), [], "a missing file is the defaults")
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: settings))
        XCTAssertEqual(try readSettings(at: settings), [1, 2, 3])
        XCTAssertThrowsError(try readSettings(at: directory.path), "a directory is not a missing file") { error in
            XCTAssertEqual(error as? UVError, .isDirectory)
        }

        LoopHarness.run { harness in
            let (_, port) = try startServer(harness)
            let second = try harness.record(TCPServer.listen(port: port))
            XCTAssertEqual(explain(try XCTUnwrap(try second.waitForTermination().error)), "the port is taken")
            let refused = try harness.record(TCP.connect(host: "127.0.0.1", port: try unusedPort()))
            XCTAssertEqual(explain(try XCTUnwrap(try refused.waitForTermination().error)), "the peer is gone")
        }
        XCTAssertThrowsError(try Signal<Int>.never.first(timeout: .milliseconds(10))) { error in
            XCTAssertEqual(explain(error), "gave up: timed out after 0.01 seconds waiting for first()")
        }
    }

    // GUIDE-SIGNALS-BATCHING-BEGIN
    // Log lines in arrays of at most 100, each sent within 200 ms of its first line.
    func batches(of lines: Signal<String>) -> Signal<[String]> {
        lines.buffer(every: .milliseconds(200), count: 100)
    }

    // Reconnect forever: waits of 100 ms, 200, 400... up to 30 s, each between half and all of
    // that, and from 100 ms again once a connection delivered. An unknown host is final.
    // Tests pass a SeededRandomNumberGenerator, so every wait is known.
    func reconnecting<Value>(_ connect: Signal<Value>,
                             random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()) -> Signal<Value> {
        connect.retry(backoff: .exponential(initial: .milliseconds(100), maximum: .seconds(30), using: random),
                      while: { ($0 as? UVError) != .nameNotFound })
    }
    // GUIDE-SIGNALS-BATCHING-END

    func testTheBatchingExampleIsThisCodeAndWorks() throws {
        try assertDocumentBlock(Self.guide, containing: "func batches(of", matches: "GUIDE-SIGNALS-BATCHING")

        // 250 lines at once make two full arrays at once and one 200 ms later; a late line waits its 200 ms.
        let test = TestScheduler()
        let lines = Subject<String>()
        let shipped = test.record(batches(of: lines))
        test.performAsCurrent { for number in 0..<250 { lines.sendNext("line \(number)") } }
        test.advance(by: .seconds(1))
        test.performAsCurrent { lines.sendNext("late") }
        test.run()
        XCTAssertEqual(shipped.recorded.map { "\($0.event.value?.count ?? -1)@\($0.time.nanoseconds / 1_000_000)" },
                       ["100@0", "100@0", "50@200", "1@1200"])
        XCTAssertEqual(shipped.values.last, ["late"])
        shipped.dispose()

        // A refused connection is tried again and again, each wait within half of its whole and the whole.
        let clock = TestScheduler()
        let attempts = Locked<[UInt64]>([])
        let refused = Signal<Int>.defer {
            attempts.withLock { $0.append(clock.now.nanoseconds) }
            return .error(UVError.connectionRefused)
        }
        let connection = clock.record(reconnecting(refused, random: SeededRandomNumberGenerator(seed: 1)))
        clock.advance(by: .seconds(120))
        let waits = zip(attempts.current, attempts.current.dropFirst()).map { Int64($1 - $0) }
        let wholes: [Int64] = [100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000].map { $0 * 1_000_000 }
        XCTAssertGreaterThanOrEqual(waits.count, 9, "\(waits)")
        for (wait, whole) in zip(waits, wholes) {
            XCTAssertTrue((whole / 2...whole).contains(wait), "a wait of \(wait) ns for a whole of \(whole) ns")
        }
        XCTAssertNil(connection.terminal, "it never gives up on a refusal")
        connection.dispose()

        let unknownHost = TestScheduler().record(reconnecting(Signal<Int>.error(UVError.nameNotFound)))
        XCTAssertEqual(unknownHost.terminal, .error(UVError.nameNotFound))
    }
}

import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Every byte a `bytes` recorder has seen, in order.
func received(_ recorder: EventRecorder<[UInt8]>) -> [UInt8] {
    recorder.values.flatMap { $0 }
}

/// Waits until a `bytes` recorder has seen at least `count` bytes.
@discardableResult
func waitForBytes(_ recorder: EventRecorder<[UInt8]>, _ count: Int, timeout: Duration = LoopHarness.defaultTimeout) throws -> [UInt8] {
    var total = 0
    try recorder.waitScanning(for: "\(count) bytes", timeout: timeout) { event in
        total += event.value?.count ?? 0
        return total >= count || event.isTerminating
    }
    return received(recorder)
}

/// An idle-timeout server's client that keeps sending to a connection nobody reads (TCP or Unix):
/// one byte every 50 ms for at least two `timeout`s, by `send`, while the connection must stay
/// open (what the kernel holds unread counts as activity); then, once the client falls silent,
/// `receiveEnd` (the client reading until the server closes it) must end in EOF or a reset (the
/// client's bytes are unread), no sooner than `timeout` after the last byte. The 50 ms pause is
/// the client's traffic, not a wait for a race; the caller's timeout is long beside it (a second or more), so a
/// client thread that a busy machine leaves unscheduled for a while is not mistaken for a silent one.
func assertAClientSendingUnreadBytesIsKeptThenTimesOut(
    timeout: Duration, isOpen: () -> Bool, file: StaticString = #filePath, line: UInt = #line,
    send: (UInt8) throws -> Void, receiveEnd: () -> BlockingClient.ReadEnd
) throws {
    let began = ContinuousClock.now
    var lastSent = began
    var sent: UInt8 = 0
    while ContinuousClock.now - began < timeout * 2 {
        sent &+= 1
        try send(sent)
        lastSent = ContinuousClock.now
        XCTAssertTrue(isOpen(), "closed while the client sends, after \(ContinuousClock.now - began)", file: file, line: line)
        Thread.sleep(forTimeInterval: 0.05)
    }
    XCTAssertTrue(isOpen(), file: file, line: line)
    let end = receiveEnd()
    XCTAssertTrue(end == .endOfFile || end == .reset, "the client was not closed: \(end)", file: file, line: line)
    XCTAssertGreaterThanOrEqual(ContinuousClock.now - lastSent, timeout, "closed before the timeout after the last byte",
                                file: file, line: line)
    XCTAssertFalse(isOpen(), file: file, line: line)
}

/// An idle-timeout server's active client (TCP or Unix): one byte every 50 ms for at least two
/// `timeout`s, each sent by `send` and read by the server (then `afterRead`, an echo where the test has one),
/// and the connection must stay open all along; then, once the client falls silent, it must be
/// closed with `ETIMEDOUT` after exactly the bytes it sent. The 50 ms pause is the client's
/// traffic, not a wait for a race; the caller's timeout is long beside it (a second or more), so a
/// client thread that a busy machine leaves unscheduled for a while is not mistaken for a silent one.
func assertAnActiveClientIsKeptOpenThenTimesOut(
    timeout: Duration, bytes: EventRecorder<[UInt8]>, isOpen: () -> Bool,
    file: StaticString = #filePath, line: UInt = #line,
    send: (UInt8) throws -> Void, afterRead: ((UInt8) throws -> Void)? = nil
) throws {
    let began = ContinuousClock.now
    var sent: UInt8 = 0
    while ContinuousClock.now - began < timeout * 2 {
        sent &+= 1
        try send(sent)
        try waitForBytes(bytes, Int(sent))
        try afterRead?(sent)
        XCTAssertNil(bytes.terminal, "closed while active, after \(ContinuousClock.now - began)", file: file, line: line)
        Thread.sleep(forTimeInterval: 0.05)
    }
    XCTAssertNil(bytes.terminal, file: file, line: line)
    XCTAssertTrue(isOpen(), file: file, line: line)
    let end = try bytes.waitForTermination()
    XCTAssertEqual((end.error as? UVError)?.name, "ETIMEDOUT", "\(end)", file: file, line: line)
    XCTAssertEqual(received(bytes).count, Int(sent), file: file, line: line)
}

/// Starts a server on a free port of 127.0.0.1 and returns its recorder and port.
func startServer(_ harness: LoopHarness, options: TCPOptions = TCPOptions()) throws -> (EventRecorder<TCPServer.Event>, Int) {
    let server = try harness.record(TCPServer.serve(host: "127.0.0.1", port: 0, options: options), label: "server")
    let first = try server.waitForValues(1)[0]
    guard case .listening(let address) = first else {
        throw TestFailure("the server's first event was \(first), not .listening")
    }
    return (server, address.port)
}

/// A server on a free port of 127.0.0.1 (`startServer`), a blocking client connected to it, and
/// the connection the server accepted: the start of most tests of one connection. The caller closes
/// the client.
func acceptOneClient(
    _ harness: LoopHarness, options: TCPOptions = TCPOptions()
) throws -> (EventRecorder<TCPServer.Event>, Int, BlockingClient, TCPConnection) {
    let (server, port) = try startServer(harness, options: options)
    let client = try BlockingClient(port: port)
    let connection = try waitForAccepted(server, 1)[0]
    return (server, port, client, connection)
}

/// The connections a server recorder has accepted so far.
func accepted(_ server: EventRecorder<TCPServer.Event>) -> [TCPConnection] {
    server.values.compactMap { event in
        if case .accepted(let connection) = event { return connection }
        return nil
    }
}

/// Waits until a server has accepted `count` connections.
@discardableResult
func waitForAccepted(_ server: EventRecorder<TCPServer.Event>, _ count: Int) throws -> [TCPConnection] {
    try server.waitForValues(count + 1)
    return accepted(server)
}

/// Holds `loop`'s thread busy in a queued closure until the returned semaphore is signalled;
/// returns once the loop is held (the closure is running).
func holdBusy(_ loop: EventLoop) throws -> DispatchSemaphore {
    let holding = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    try loop.tryExecute {
        holding.signal()
        release.wait()
    }
    holding.wait()
    return release
}

/// The first event `signal` sends (recorded on `harness`'s loop) while `loop` has been asked to
/// shut down and has not begun: the loop is held busy, asked from the harness's loop thread
/// (which starts the shutdown and does not wait), and released once the event arrived; this
/// returns after the loop has shut down.
func firstEvent<Value>(of signal: Signal<Value>, whileTheShutdownOf loop: EventLoop,
                       isPendingOn harness: LoopHarness) throws -> Event<Value> {
    let release = try holdBusy(loop)
    let first = Result { () throws -> Event<Value> in
        try harness.onLoop { loop.shutdown() }
        let recorder = try harness.record(signal, label: "server")
        try recorder.wait(for: "the first event") { !$0.isEmpty }
        return recorder.events[0]
    }
    release.signal()
    try harness.wait(for: "loop \(loop.name) shut down") { loop.isShutDown }
    return try first.get()
}

/// A failed expectation inside a test helper.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The `UVError` name of a recorder's terminal error, or nil.
func errorName<Value>(_ recorder: EventRecorder<Value>) -> String? {
    (recorder.terminal?.error as? UVError)?.name
}

extension Event {
    /// Whether this is `.completed`.
    var isCompleted: Bool {
        if case .completed = self { return true }
        return false
    }
}

/// Checks how a server's idle timeout ended a connection's `bytes`: no sooner than `timeout` after
/// `connected`, with `ETIMEDOUT` naming the timeout (0.3 s in the tests) and `option`.
func assertClosedForIdleness(_ end: Event<[UInt8]>, connected: ContinuousClock.Instant, timeout: Duration, option: String,
                             file: StaticString = #filePath, line: UInt = #line) throws {
    XCTAssertGreaterThanOrEqual(ContinuousClock.now - connected, timeout, "closed before the idle timeout", file: file, line: line)
    let error = try XCTUnwrap(end.error as? UVError, "\(end)", file: file, line: line)
    XCTAssertEqual(error.name, "ETIMEDOUT", file: file, line: line)
    XCTAssertTrue("\(error)".contains("\(timeout)") && "\(error)".contains(option), "\(error)", file: file, line: line)
}

/// The live heap's growth per connection while `open()` adds `count` connections and `accepted()`
/// reaches `total`, read on the loop thread between its callbacks (nothing of ours half made).
func liveHeapBytesPerConnection(_ harness: LoopHarness, adding count: Int, reaching total: Int,
                                accepted: @escaping () -> Int, open: () throws -> Void) throws -> Double {
    let before = try harness.onLoop { ruv_test_live_heap_bytes() }
    try open()
    try harness.wait(for: "\(total) accepted") { accepted() == total }
    let after = try harness.onLoop { ruv_test_live_heap_bytes() }
    return (Double(after) - Double(before)) / Double(count)
}

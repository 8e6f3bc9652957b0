import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `Poll.readiness` on descriptors the test owns: readiness reported, polling stopped by dispose,
/// the descriptor never closed, and each bad input answered at the door.
final class PollTests: XCTestCase {
    /// Descriptors the test opened; each is closed once, at the end unless the test closed it.
    private var owned: Set<Int32> = []

    override func tearDown() {
        for descriptor in owned { Glibc.close(descriptor) }
        owned.removeAll()
        super.tearDown()
    }

    // MARK: - Readiness

    func testReadableIsReportedOnceThePeerWritesAndNotBefore() throws {
        let (mine, peer) = try socketPair()
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: mine))
            try harness.wait(for: "the poll handle") { self.pollHandles(harness) == ["poll on fd \(mine) from Poll.readiness"] }
            try loopIterations(harness)
            XCTAssertEqual(poll.events.count, 0, "nothing to read yet, so nothing may be reported: \(poll.events)")

            try put(1, to: peer)
            let first = try poll.waitForValues(1)[0]
            XCTAssertEqual(first, .readable)
            XCTAssertEqual(try take(from: mine), 1)
        }
    }

    func testWritableIsReported() throws {
        let (mine, _) = try socketPair()
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: mine, events: .writable))
            XCTAssertEqual(try poll.waitForValues(1)[0], .writable)
            XCTAssertNil(poll.terminal)
        }
    }

    /// Only the events asked for are reported: a writable socket polled for reading stays silent.
    func testOnlyTheEventsAskedForAreReported() throws {
        let (mine, peer) = try socketPair()
        try checked { harness in
            let both = try harness.record(Poll.readiness(fd: mine, events: [.readable, .writable]))
            XCTAssertEqual(try both.waitForValues(1)[0], .writable, "writable at once, nothing to read")
            both.dispose()
            _ = try harness.onLoop {}
            try put(7, to: peer)
            let readable = try harness.record(Poll.readiness(fd: mine, events: .readable))
            try readable.waitForValues(3)
            XCTAssertEqual(Set(readable.values), [.readable], "level-triggered, and never .writable: \(readable.values)")
        }
    }

    func testDisconnectIsReportedWhenThePeerCloses() throws {
        let (mine, peer) = try socketPair()
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: mine, events: .disconnect))
            try harness.wait(for: "the poll handle") { self.pollHandles(harness).count == 1 }
            try loopIterations(harness)
            XCTAssertEqual(poll.events.count, 0, "the peer is still there: \(poll.events)")
            closeOwned(peer)
            let first = try poll.waitForValues(1)[0]
            XCTAssertTrue(first.contains(.disconnect), "\(first)")
            XCTAssertTrue(first.isSubset(of: .disconnect), "only what was asked for: \(first)")
        }
    }

    /// A pipe has no EPOLLRDHUP: its hang-up (EPOLLHUP alone) is reported as every event asked for.
    func testAPipeWhoseWriterClosedReportsDisconnect() throws {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        owned.formUnion(ends)
        let (reader, writer) = (ends[0], ends[1])
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: reader, events: [.readable, .disconnect]))
            try harness.wait(for: "the poll handle") { self.pollHandles(harness).count == 1 }
            try loopIterations(harness)
            XCTAssertEqual(poll.events.count, 0, "the writer is still there: \(poll.events)")
            closeOwned(writer)
            XCTAssertEqual(try poll.waitForValues(1)[0], [.readable, .disconnect])
        }
    }

    // MARK: - Dispose, shutdown and the descriptor

    /// Level-triggered: an unread byte is reported on every iteration until dispose stops it.
    /// The descriptor stays open and usable, after dispose and after the loop shut down.
    func testDisposeStopsReportsAndNeverClosesTheDescriptor() throws {
        let (mine, peer) = try socketPair()
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: mine))
            try put(1, to: peer)
            try poll.waitForValues(3)  // reported again and again while the byte stays unread
            poll.dispose()
            _ = try harness.onLoop {}  // runs after the dispose's hop to the loop
            let count = poll.values.count
            try loopIterations(harness)
            XCTAssertEqual(poll.values.count, count, "a report after dispose")
            XCTAssertNil(poll.terminal, "disposing sends nothing")
            XCTAssertEqual(pollHandles(harness), [])
            XCTAssertTrue(isOpen(mine), "dispose closed a descriptor it does not own")
            XCTAssertEqual(try take(from: mine), 1)
        }
        XCTAssertTrue(isOpen(mine), "the loop's shutdown closed a descriptor it does not own")
        try put(2, to: mine)
        XCTAssertEqual(try take(from: peer), 2)
    }

    func testLoopShutdownEndsThePollWithShutDownAndLeavesTheDescriptorOpen() throws {
        let (mine, peer) = try socketPair()
        let loop = EventLoop(name: "poll-shutdown")
        let recorder = Locked<EventRecorder<PollEvents>?>(nil)
        loop.execute { recorder.withLock { $0 = EventRecorder(Poll.readiness(fd: mine)) } }
        waitUntil("the poll to start") { recorder.current != nil }
        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(report.closedHandles.count, 1, "the poll handle")
        XCTAssertEqual(recorder.current?.terminal?.error as? EventLoopError, .shutDown(loop: "poll-shutdown"))
        XCTAssertTrue(isOpen(mine), "the loop's shutdown closed a descriptor it does not own")
        try put(3, to: peer)
        XCTAssertEqual(try take(from: mine), 3)
    }

    /// Once a subscription is disposed, its descriptor can be polled again on the same loop.
    func testAfterDisposeTheSameDescriptorCanBePolledAgain() throws {
        let (mine, peer) = try socketPair()
        try checked { harness in
            let first = try harness.record(Poll.readiness(fd: mine))
            try harness.wait(for: "the poll handle") { self.pollHandles(harness).count == 1 }
            first.dispose()
            let second = try harness.record(Poll.readiness(fd: mine))
            try put(1, to: peer)
            XCTAssertEqual(try second.waitForValues(1)[0], .readable)
            XCTAssertEqual(first.values, [])
        }
    }

    // MARK: - Bad input

    func testADescriptorThatIsNotOpenIsEBADF() throws {
        // The kernel hands out the lowest free number: the highest the limit allows is never open here.
        var limit = rlimit()
        XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit), 0)
        let closed = Int32(clamping: min(limit.rlim_cur, 1 << 20) - 1)
        XCTAssertFalse(isOpen(closed), "precondition: fd \(closed) is not open")
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: closed))
            let error = try XCTUnwrap(poll.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EBADF")
            XCTAssertEqual(error.message, "fd \(closed) is not an open file descriptor")
            XCTAssertEqual(pollHandles(harness), [])
        }
    }

    func testANegativeDescriptorIsEINVAL() throws {
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: -1))
            let error = try XCTUnwrap(poll.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EINVAL")
            XCTAssertTrue(error.message.contains("never negative, got -1"), error.description)
        }
    }

    func testARegularFileIsEPERMSayingItIsAlwaysReady() throws {
        let path = NSTemporaryDirectory() + "poll-\(getpid())-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = open(path, O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(file, 0)
        owned.insert(file)
        let directory = open(NSTemporaryDirectory(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(directory, 0)
        owned.insert(directory)
        try checked { harness in
            for (descriptor, what) in [(file, "a regular file"), (directory, "a directory")] {
                let poll = try harness.record(Poll.readiness(fd: descriptor))
                let error = try XCTUnwrap(poll.waitForTermination().error as? UVError)
                XCTAssertEqual(error.name, "EPERM")
                XCTAssertTrue(error.message.contains("fd \(descriptor) is \(what)"), error.description)
                XCTAssertTrue(error.message.contains("always ready and cannot be polled"), error.description)
                XCTAssertTrue(isOpen(descriptor))
            }
            XCTAssertEqual(pollHandles(harness), [])
        }
    }

    func testAnEmptyOrUnknownEventSetIsEINVAL() throws {
        let (mine, _) = try socketPair()
        try checked { harness in
            for events in [PollEvents(), PollEvents(rawValue: 0x100), [.readable, PollEvents(rawValue: 0x100)]] {
                let poll = try harness.record(Poll.readiness(fd: mine, events: events))
                let error = try XCTUnwrap(poll.waitForTermination().error as? UVError, "\(events)")
                XCTAssertEqual(error.name, "EINVAL")
                XCTAssertTrue(error.message.contains("got \(events)"), error.description)
            }
            XCTAssertEqual(pollHandles(harness), [])
        }
    }

    /// libuv allows one poll handle per descriptor per loop: the second subscription is refused
    /// with a message saying so, and the first keeps reporting.
    func testASecondPollOfOneDescriptorOnOneLoopIsEEXISTAndTheFirstGoesOn() throws {
        let (mine, peer) = try socketPair()
        try checked { harness in
            let first = try harness.record(Poll.readiness(fd: mine))
            let second = try harness.record(Poll.readiness(fd: mine, events: [.readable, .writable]))
            let error = try XCTUnwrap(second.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EEXIST")
            XCTAssertTrue(error.message.contains("fd \(mine) is already polled on loop 'harness'"), error.description)
            XCTAssertTrue(error.message.contains("one poll handle per descriptor per loop"), error.description)
            XCTAssertEqual(pollHandles(harness).count, 1)

            try put(1, to: peer)
            XCTAssertEqual(try first.waitForValues(1)[0], .readable, "the first poll goes on")
        }
    }

    /// The same descriptor polled on two loops: each loop has its own epoll set, so both report.
    func testOneDescriptorCanBePolledOnTwoLoops() throws {
        let (mine, peer) = try socketPair()
        let other = LoopHarness(name: "other")
        defer { XCTAssertTrue(other.finish().isClean) }
        try checked { harness in
            let here = try harness.record(Poll.readiness(fd: mine))
            let there = try other.record(Poll.readiness(fd: mine))
            try put(1, to: peer)
            XCTAssertEqual(try here.waitForValues(1)[0], .readable)
            XCTAssertEqual(try there.waitForValues(1)[0], .readable)
        }
    }

    /// A pipe whose reading end closed reports POLLERR to a writer's poll; libuv calls it EBADF.
    func testAnErrorConditionEndsThePollNamingTheDescriptor() throws {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        owned.formUnion(ends)
        let (reader, writer) = (ends[0], ends[1])
        closeOwned(reader)
        try checked { harness in
            let poll = try harness.record(Poll.readiness(fd: writer, events: .writable))
            let error = try XCTUnwrap(poll.waitForTermination().error as? UVError)
            XCTAssertEqual(error.name, "EBADF")
            XCTAssertTrue(error.message.contains("fd \(writer) reported an error condition (POLLERR)"), error.description)
            XCTAssertEqual(pollHandles(harness), [], "the failed poll's handle is closed")
            XCTAssertTrue(isOpen(writer))
        }
    }

    // MARK: - Helpers

    private func socketPair() throws -> (Int32, Int32) {
        var ends: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw TestFailure("socketpair failed: errno \(errno)")
        }
        owned.formUnion(ends)
        return (ends[0], ends[1])
    }

    private func closeOwned(_ descriptor: Int32) {
        guard owned.remove(descriptor) != nil else { return }
        Glibc.close(descriptor)
    }

    private func isOpen(_ descriptor: Int32) -> Bool {
        fcntl(descriptor, F_GETFD) != -1
    }

    /// Writes one byte; a closed peer is an error here, not a SIGPIPE that ends the test process.
    private func put(_ byte: UInt8, to descriptor: Int32) throws {
        var value = byte
        guard Glibc.send(descriptor, &value, 1, Int32(MSG_NOSIGNAL)) == 1 else { throw TestFailure("write to fd \(descriptor): errno \(errno)") }
    }

    /// Reads one byte; the descriptor may be non-blocking now (libuv set it), so a byte must be waiting.
    private func take(from descriptor: Int32) throws -> UInt8 {
        var value: UInt8 = 0
        guard read(descriptor, &value, 1) == 1 else { throw TestFailure("read from fd \(descriptor): errno \(errno)") }
        return value
    }

    /// The labels of the loop's open poll handles.
    private func pollHandles(_ harness: LoopHarness) -> [String] {
        ((try? harness.loop.openHandles()) ?? []).filter { $0.kind == "poll" }.compactMap(\.label)
    }

    /// Lets the loop run three round trips of queued work: every descriptor registered before
    /// has been through a full `epoll_wait` and its callbacks by then.
    private func loopIterations(_ harness: LoopHarness) throws {
        for _ in 0..<3 { _ = try harness.onLoop {} }
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

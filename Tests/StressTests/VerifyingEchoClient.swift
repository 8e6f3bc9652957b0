import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization

/// What the echo clients of one workload report, read by the test thread.
final class FleetTally: Sendable {
    /// Clients whose connection is established.
    let connected = Atomic<Int>(0)
    /// Clients that finished, well or not.
    let finished = Atomic<Int>(0)
    /// Messages echoed back whole and checked byte for byte.
    let roundTrips = Atomic<Int>(0)
    /// Echoed bytes compared with what was sent.
    let bytesChecked = Atomic<Int>(0)
    /// Set by the test: clients send no new message, half-close once the ones in flight are back.
    let stopRequested = Atomic<Bool>(false)
    /// One line per client that failed.
    let failures = Locked<[String]>([])
    /// The bytes each successful client sent (and got back), by client index.
    let bytesByClient = Locked<[Int: Int]>([:])

    /// A short summary for timeout messages.
    var summary: String {
        "\(connected.load(ordering: .relaxed)) connected, \(finished.load(ordering: .relaxed)) finished, "
            + "\(roundTrips.load(ordering: .relaxed)) round trips, failures: \(failures.current.prefix(5))"
    }
}

/// One echo client on a client loop: it connects, and once told to go sends numbered
/// messages, keeping up to `window` in flight, and compares every echoed byte with what it sent.
///
/// Message m of client c is 8 + (7c + 13m) % 120 bytes long: c and m as little-endian
/// `UInt32`s, then bytes computed from c, m and the position, so a byte from another
/// message, another client or another place in the stream is caught. After its last
/// message (or once `stopRequested` is set) is echoed, the client half-closes; the
/// server then closes, and only an EOF with every byte accounted for counts as success.
final class VerifyingEchoClient: @unchecked Sendable {
    // Everything except the immutable settings and `tally` (atomics and locks) is touched only on `loop`'s thread.
    let index: Int
    let loop: EventLoop
    private let messageLimit: Int
    private let window: Int
    private let tally: FleetTally
    private var connecting: (any Disposable)?
    private var reading: (any Disposable)?
    private var connection: TCPConnection?
    private var sent = 0
    private var echoed = 0
    /// Bytes sent and not yet echoed start at `unechoed[unechoedStart]`.
    private var unechoed: [UInt8] = []
    private var unechoedStart = 0
    /// The stream offset at which each message in flight ends, oldest first from `endsStart`.
    private var messageEnds: [Int] = []
    private var endsStart = 0
    private var bytesSent = 0
    private var bytesChecked = 0
    private var halfClosed = false
    private var done = false

    init(index: Int, loop: EventLoop, messages: Int, window: Int, tally: FleetTally) {
        self.index = index
        self.loop = loop
        messageLimit = messages
        self.window = window
        self.tally = tally
    }

    /// Message `number` of client `client`.
    static func message(client: Int, number: Int) -> [UInt8] {
        let length = 8 + (client &* 7 &+ number &* 13) % 120
        var bytes = [UInt8](repeating: 0, count: length)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(truncatingIfNeeded: client).littleEndian, toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: number).littleEndian, toByteOffset: 4, as: UInt32.self)
            let seed = client &* 131 &+ number &* 31
            for position in 8..<length { raw[position] = UInt8(truncatingIfNeeded: seed &+ position &* 7) }
        }
        return bytes
    }

    /// The bytes client `client` sends in all with `messages` messages.
    static func totalBytes(client: Int, messages: Int) -> Int {
        (0..<messages).reduce(0) { $0 + 8 + (client &* 7 &+ $1 &* 13) % 120 }
    }

    /// Connects to 127.0.0.1:`port`; `then` runs once the connection is made or has failed. Loop thread only.
    func connect(port: Int, then: @escaping @Sendable () -> Void) {
        // Both callbacks below may report; they run on this loop thread, one at a time.
        let reported = Locked(false)
        let report: @Sendable () -> Void = {
            if !reported.withLock({ reported in defer { reported = true }; return reported }) { then() }
        }
        connecting = TCP.connect(host: "127.0.0.1", port: port, timeout: .seconds(60)).subscribe(
            next: { [self] connection in
                self.connection = connection
                reading = connection.bytes.subscribe(
                    next: { [self] chunk in received(chunk) },
                    error: { [self] error in fail("read failed after \(echoed) messages echoed: \(error)") },
                    completed: { [self] in
                        if halfClosed && bytesChecked == bytesSent {
                            succeed()
                        } else {
                            fail("EOF after \(echoed) of \(sent) messages sent were echoed (\(bytesChecked) of \(bytesSent) bytes)")
                        }
                    })
                tally.connected.add(1, ordering: .relaxed)
                report()
            },
            error: { [self] error in
                fail("connect failed: \(error)")
                report()
            },
            completed: { [self] in
                if !done { fail("the connection closed after \(echoed) messages echoed") }
            })
    }

    /// Starts sending. Loop thread only.
    func go() { sendMore() }

    /// Sends messages until `window` are in flight; half-closes once the last is back.
    private func sendMore() {
        guard !done, !halfClosed, let connection else { return }
        let stopping = tally.stopRequested.load(ordering: .relaxed)
        while !stopping && sent < messageLimit && sent - echoed < window {
            let message = VerifyingEchoClient.message(client: index, number: sent)
            sent += 1
            bytesSent += message.count
            unechoed.append(contentsOf: message)
            messageEnds.append(bytesSent)
            connection.send(message)
        }
        if sent == echoed && (stopping || sent == messageLimit) {
            halfClosed = true
            connection.shutdown()
        }
    }

    private func received(_ chunk: [UInt8]) {
        guard !done else { return }
        let available = unechoed.count - unechoedStart
        guard chunk.count <= available else {
            fail("got \(chunk.count) bytes with only \(available) sent and not yet echoed (message \(echoed))")
            return
        }
        let same = chunk.withUnsafeBytes { got in
            unechoed.withUnsafeBytes { memcmp(got.baseAddress!, $0.baseAddress! + unechoedStart, chunk.count) == 0 }
        }
        guard same else {
            fail("echoed bytes \(bytesChecked)..<\(bytesChecked + chunk.count) (message \(echoed)) differ from what was sent")
            return
        }
        unechoedStart += chunk.count
        bytesChecked += chunk.count
        var completed = 0
        while endsStart < messageEnds.count && messageEnds[endsStart] <= bytesChecked {
            endsStart += 1
            completed += 1
        }
        echoed += completed
        if unechoedStart > 4096 && unechoedStart * 2 > unechoed.count {
            unechoed.removeFirst(unechoedStart)
            unechoedStart = 0
            messageEnds.removeFirst(endsStart)
            endsStart = 0
        }
        tally.bytesChecked.add(chunk.count, ordering: .relaxed)
        if completed > 0 {
            tally.roundTrips.add(completed, ordering: .relaxed)
            sendMore()
        }
    }

    private func succeed() {
        tally.bytesByClient.withLock { $0[index] = bytesSent }
        end()
    }

    private func fail(_ message: String) {
        guard !done else { return }
        tally.failures.withLock { $0.append("client \(index): \(message)") }
        end()
    }

    private func end() {
        guard !done else { return }
        done = true
        tally.finished.add(1, ordering: .relaxed)
        connection?.close()
        connection = nil
        reading?.dispose()
        connecting?.dispose()
    }
}

/// The echo clients of one client loop: connects them at most `maxConnecting` at a time
/// (the server's backlog is 128; beyond it SYNs are dropped and retried a second later),
/// then starts them all at once.
final class ClientFleet: @unchecked Sendable {
    // `loop` and `clients` are immutable; `next` is touched only on `loop`'s thread.
    let loop: EventLoop
    let clients: [VerifyingEchoClient]
    private let maxConnecting: Int
    private var next = 0

    init(loop: EventLoop, clients: [VerifyingEchoClient], maxConnecting: Int) {
        self.loop = loop
        self.clients = clients
        self.maxConnecting = maxConnecting
    }

    /// Starts connecting (from any thread).
    func startConnecting(port: Int) {
        loop.execute { [self] in
            for _ in 0..<maxConnecting { connectNext(port: port) }
        }
    }

    private func connectNext(port: Int) {
        guard next < clients.count else { return }
        let client = clients[next]
        next += 1
        client.connect(port: port) { [self] in connectNext(port: port) }
    }

    /// Tells every client to start sending (from any thread).
    func go() {
        loop.execute { [self] in
            for client in clients { client.go() }
        }
    }
}

/// An integer from the environment, or `fallback` when it is unset or not a positive number.
func environmentInt(_ name: String, default fallback: Int) -> Int {
    guard let text = ProcessInfo.processInfo.environment[name], let value = Int(text), value > 0 else { return fallback }
    return value
}

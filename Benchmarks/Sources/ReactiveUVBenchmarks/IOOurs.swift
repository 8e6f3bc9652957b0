import CBaselines
import Foundation
import ReactiveUV

/// Our side of the I/O scenarios, with the same workloads as the C baselines.
enum IOOurs {
    /// TCP echo ping-pong: the server and the client each on a loop of their own (pinned like the C baseline).
    /// With `async`, the server echoes as the async guide's echo server does: a task that prefers the server's
    /// loop runs `for try await chunk in connection.bytes.values { connection.send(chunk) }`.
    static func echo(size: Int, warmup: Int, measure: Int, serverCPU: Int?, clientCPU: Int?, async: Bool = false) -> EchoFigures? {
        let serverLoop = ReactiveUV.EventLoop(name: "echo-server")
        let clientLoop = ReactiveUV.EventLoop(name: "echo-client")
        defer {
            clientLoop.shutdown()
            serverLoop.shutdown()
        }
        serverLoop.execute { pinCurrentThread(to: serverCPU) }
        clientLoop.execute { pinCurrentThread(to: clientCPU) }
        let listening = ResultBox<Int>()
        let ready = CondFlag()
        let server = SerialDisposable()
        // Subscribed on the loops' own threads, so every event stays on its loop.
        serverLoop.execute {
            server.inner = TCPServer.serve(port: 0).subscribeNext { event in
                switch event {
                case .listening(let address):
                    listening.value = address.port
                    ready.signal()
                case .refused, .draining:
                    break
                case .accepted(let connection):
                    try? connection.setNoDelay(true)
                    if async {
                        Task(executorPreference: serverLoop) {
                            for try await chunk in connection.bytes.values { connection.send(chunk) }
                        }
                    } else {
                        _ = connection.bytes.subscribeNext { connection.send($0) }
                    }
                }
            }
        }
        defer { server.dispose() }
        ready.wait()
        guard let port = listening.value else { return nil }
        let done = CondFlag()
        let result = ResultBox<EchoFigures>()
        let client = PingPongClient(size: size, warmup: warmup, measure: measure) { figures in
            result.value = figures
            done.signal()
        }
        let connect = SerialDisposable()
        clientLoop.execute {
            connect.inner = TCP.connect(host: "127.0.0.1", port: port).subscribeNext { client.start($0) }
        }
        done.wait()
        connect.dispose()
        return result.value
    }

    /// Unix-socket echo ping-pong: `echo`'s workload over a Unix-domain socket at `path` (UnixSocket.serve/connect).
    static func unixEcho(path: String, size: Int, warmup: Int, measure: Int, serverCPU: Int?, clientCPU: Int?) -> EchoFigures? {
        let serverLoop = ReactiveUV.EventLoop(name: "unix-echo-server")
        let clientLoop = ReactiveUV.EventLoop(name: "unix-echo-client")
        defer {
            clientLoop.shutdown()
            serverLoop.shutdown()
        }
        serverLoop.execute { pinCurrentThread(to: serverCPU) }
        clientLoop.execute { pinCurrentThread(to: clientCPU) }
        let listening = ResultBox<Bool>()
        let ready = CondFlag()
        let server = SerialDisposable()
        serverLoop.execute {
            server.inner = UnixSocket.serve(path: path).subscribe(next: { event in
                switch event {
                case .listening:
                    listening.value = true
                    ready.signal()
                case .refused, .draining:
                    break
                case .accepted(let connection):
                    _ = connection.bytes.subscribeNext { connection.send($0) }
                }
            }, error: { error in
                print("   (UnixSocket.serve failed: \(error))")
                ready.signal()
            })
        }
        defer { server.dispose() }
        ready.wait()
        guard listening.value == true else { return nil }
        let done = CondFlag()
        let result = ResultBox<EchoFigures>()
        let client = PingPongClient(size: size, warmup: warmup, measure: measure) { figures in
            result.value = figures
            done.signal()
        }
        let connect = SerialDisposable()
        clientLoop.execute {
            connect.inner = UnixSocket.connect(path: path).subscribeNext { client.start($0) }
        }
        done.wait()
        connect.dispose()
        return result.value
    }

    /// TCP pump: one connection, `inFlight` sends of 64 KiB outstanding, until `total` bytes reached the server.
    static func pump(total: UInt64) -> Double? {
        let loop = ReactiveUV.EventLoop(name: "pump")
        defer { loop.shutdown() }
        let listening = ResultBox<Int>()
        let ready = CondFlag()
        let received = ResultBox<UInt64>()
        let finished = CondFlag()
        let timing = PhaseBox()
        let server = SerialDisposable()
        loop.execute {
            server.inner = TCPServer.serve(port: 0).subscribeNext { event in
                switch event {
                case .listening(let address):
                    listening.value = address.port
                    ready.signal()
                case .refused, .draining:
                    break
                case .accepted(let connection):
                    let count = ResultBox<UInt64>()
                    count.value = 0
                    _ = connection.bytes.subscribeNext { chunk in
                        count.value! += UInt64(chunk.count)
                        if count.value! >= total && received.value == nil {
                            timing.started = nanoseconds()
                            received.value = count.value
                            finished.signal()
                        }
                    }
                }
            }
        }
        defer { server.dispose() }
        ready.wait()
        guard let port = listening.value else { return nil }
        let payload = [UInt8](repeating: 0x70, count: 65_536)
        let connect = SerialDisposable()
        loop.execute {
            connect.inner = TCP.connect(host: "127.0.0.1", port: port).subscribeNext { connection in
                try? connection.setNoDelay(true)
                let sender = PumpSender(connection: connection, payload: payload, total: total)
                timing.begin = nanoseconds()
                for _ in 0..<8 { sender.sendNext() }
            }
        }
        finished.wait()
        connect.dispose()
        let elapsed = Double(timing.started - timing.begin) / 1e9
        return Double(total) / 1e6 / elapsed
    }

    /// Unix-socket pump: the TCP pump's workload over a Unix-domain socket at `path` (libuv's `pipe_pump`).
    static func unixPump(path: String, total: UInt64) -> Double? {
        let loop = ReactiveUV.EventLoop(name: "unix-pump")
        defer { loop.shutdown() }
        let ready = CondFlag()
        let failed = ResultBox<Bool>()
        let received = ResultBox<UInt64>()
        let finished = CondFlag()
        let timing = PhaseBox()
        let server = SerialDisposable()
        loop.execute {
            server.inner = UnixSocket.serve(path: path, options: UnixSocketOptions(removeStaleSocketFile: true)).subscribe(next: { event in
                switch event {
                case .listening:
                    ready.signal()
                case .refused, .draining:
                    break
                case .accepted(let connection):
                    let count = ResultBox<UInt64>()
                    count.value = 0
                    _ = connection.bytes.subscribeNext { chunk in
                        count.value! += UInt64(chunk.count)
                        if count.value! >= total && received.value == nil {
                            timing.started = nanoseconds()
                            received.value = count.value
                            finished.signal()
                        }
                    }
                }
            }, error: { error in
                print("unix pump: \(error)")
                failed.value = true
                ready.signal()
            })
        }
        defer { server.dispose() }
        ready.wait()
        if failed.value == true { return nil }
        let payload = [UInt8](repeating: 0x70, count: 65_536)
        let connect = SerialDisposable()
        loop.execute {
            connect.inner = UnixSocket.connect(path: path).subscribeNext { connection in
                let sender = PumpSender(connection: connection, payload: payload, total: total)
                timing.begin = nanoseconds()
                for _ in 0..<8 { sender.sendNext() }
            }
        }
        finished.wait()
        connect.dispose()
        let elapsed = Double(timing.started - timing.begin) / 1e9
        return Double(total) / 1e6 / elapsed
    }

    /// File-watch latency: one-byte writes to a file in a watched directory; time until the event arrived.
    static func fileWatch(directory: String, file: String, count: Int) -> [UInt64]? {
        let loop = ReactiveUV.EventLoop(name: "watch")
        defer { loop.shutdown() }
        let arrived = CondFlag()
        let deliveredAt = ResultBox<UInt64>()
        let watching = CondFlag()
        let watch = SerialDisposable()
        loop.execute {
            watch.inner = FileWatch.changes(at: directory).subscribeNext { _ in
                deliveredAt.value = nanoseconds()
                arrived.signal()
            }
            watching.signal()
        }
        defer { watch.dispose() }
        watching.wait()
        let descriptor = open(file, O_WRONLY | O_CREAT, 0o644)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var latencies: [UInt64] = []
        var byte: UInt8 = 0x78
        for _ in 0..<count {
            let begin = nanoseconds()
            guard pwrite(descriptor, &byte, 1, 0) == 1 else { return nil }
            arrived.wait()
            latencies.append((deliveredAt.value ?? begin) - begin)
        }
        return latencies
    }
}

/// The ping-pong client: one message in flight, latencies recorded after the warm-up.
final class PingPongClient: @unchecked Sendable {
    // Touched only on the client loop's thread.
    private let message: [UInt8]
    private let warmup: Int
    private let measure: Int
    private let report: (EchoFigures) -> Void
    private var connection: StreamConnection?
    private var received = 0
    private var sentAt: UInt64 = 0
    private var from: UInt64 = 0
    private var until: UInt64 = 0
    private var roundTrips = 0
    private var latencies: [UInt64] = []
    private var finished = false

    init(size: Int, warmup: Int, measure: Int, report: @escaping (EchoFigures) -> Void) {
        message = [UInt8](repeating: 0x78, count: size)
        self.warmup = warmup
        self.measure = measure
        self.report = report
        latencies.reserveCapacity(1_000_000)
    }

    func start(_ connection: StreamConnection) {
        self.connection = connection
        if let tcp = connection as? TCPConnection { try? tcp.setNoDelay(true) }
        from = nanoseconds() + UInt64(warmup) * 1_000_000
        until = from + UInt64(measure) * 1_000_000
        _ = connection.bytes.subscribeNext { [self] chunk in received(chunk.count) }
        send()
    }

    private func send() {
        sentAt = nanoseconds()
        connection?.send(message)
    }

    private func received(_ count: Int) {
        guard !finished else { return }
        received += count
        guard received >= message.count else { return }
        received = 0
        let now = nanoseconds()
        if now >= from {
            roundTrips += 1
            latencies.append(now - sentAt)
        }
        if now >= until {
            finished = true
            let sorted = latencies.sorted()
            report(EchoFigures(roundTripsPerSecond: Double(roundTrips) / (Double(now - from) / 1e9),
                               medianMicroseconds: percentile(sorted, 0.5) / 1000))
            return
        }
        send()
    }
}

/// Keeps `in flight` sends outstanding until `total` bytes were queued.
final class PumpSender: @unchecked Sendable {
    // Touched only on the loop thread.
    private let connection: StreamConnection
    private let payload: [UInt8]
    private let total: UInt64
    private var queued: UInt64 = 0

    init(connection: StreamConnection, payload: [UInt8], total: UInt64) {
        self.connection = connection
        self.payload = payload
        self.total = total
    }

    func sendNext() {
        guard queued < total else { return }
        queued += UInt64(payload.count)
        connection.send(payload) { [self] error in
            if error == nil { sendNext() }
        }
    }
}

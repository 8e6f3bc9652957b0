import CBaselines
import Foundation
import ReactiveUV

/// Our side of the TLS scenarios: the C baselines' workloads (`tls_bench.c`) on one loop, server
/// and client both ours, the client trusting only the test certificate and checking "localhost".
enum TLSOurs {
    static func configurations(_ files: TLSFiles) -> (server: TLSServerConfiguration, client: TLSClientConfiguration)? {
        do {
            let server = try TLSServerConfiguration(certificateChain: .file(files.certificate), privateKey: .file(files.key))
            let client = try TLSClientConfiguration(trustRoots: .certificates(.file(files.certificate)), serverName: "localhost")
            return (server, client)
        } catch {
            print("   (TLS configuration failed: \(error))")
            return nil
        }
    }

    /// A TLS server on `loop` (subscribed on its thread); `accepted` runs on it for each connection
    /// whose handshake finished. Returns the port, or nil.
    static func listen(on loop: ReactiveUV.EventLoop, _ tls: TLSServerConfiguration, server: SerialDisposable,
                       accepted: @escaping @Sendable (TCPConnection) -> Void) -> Int? {
        let listening = ResultBox<Int>()
        let ready = CondFlag()
        loop.execute {
            server.inner = TCPServer.serve(port: 0, backlog: 1024, tls: tls, onHandshakeFailure: { error in
                print("   (server handshake failed: \(error))")
            }).subscribe(next: { event in
                switch event {
                case .listening(let address):
                    listening.value = address.port
                    ready.signal()
                case .refused, .draining:
                    break
                case .accepted(let connection):
                    accepted(connection)
                }
            }, error: { error in
                print("   (TLS server failed: \(error))")
                ready.signal()
            })
        }
        ready.wait()
        return listening.value
    }

    /// Bulk: `total` bytes in 64 KiB sends, 8 in flight, decrypted and counted by the server.
    /// Returns MB/s and what the handshake agreed on.
    static func pump(_ files: TLSFiles, total: UInt64) -> (rate: Double, agreed: String)? {
        guard let configured = configurations(files) else { return nil }
        let (serverTLS, clientTLS) = configured
        let loop = ReactiveUV.EventLoop(name: "tls-pump")
        defer { loop.shutdown() }
        let finished = CondFlag()
        let timing = PhaseBox()
        let agreed = ResultBox<String>()
        let server = SerialDisposable()
        let received = ResultBox<UInt64>()
        let port = listen(on: loop, serverTLS, server: server) { connection in
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
        defer { server.dispose() }
        guard let port else { return nil }
        let payload = [UInt8](repeating: 0x70, count: 65_536)
        let connect = SerialDisposable()
        loop.execute {
            connect.inner = TCP.connect(host: "127.0.0.1", port: port, tls: clientTLS).subscribe(next: { connection in
                agreed.value = connection.tls.map { "\($0.protocolVersion) \($0.cipher)" }
                let sender = PumpSender(connection: connection, payload: payload, total: total)
                timing.begin = nanoseconds()
                for _ in 0..<8 { sender.sendNext() }
            }, error: { error in
                print("   (TLS connect failed: \(error))")
                finished.signal()
            })
        }
        finished.wait()
        connect.dispose()
        guard received.value != nil else { return nil }
        return (Double(total) / 1e6 / (Double(timing.started - timing.begin) / 1e9), agreed.value ?? "?")
    }

    /// Handshakes: `count` connections, `inFlight` at a time, each closed by the client as soon as
    /// its handshake finished (close_notify, then FIN) and by the server when it read that end.
    /// Returns handshakes per second, timed until the server finished the last one.
    static func handshakes(_ files: TLSFiles, count: Int, inFlight: Int) -> Double? {
        guard let configured = configurations(files) else { return nil }
        let (serverTLS, clientTLS) = configured
        let loop = ReactiveUV.EventLoop(name: "tls-handshakes")
        defer { loop.shutdown() }
        let finished = CondFlag()
        let state = HandshakeState()
        let server = SerialDisposable()
        let port = listen(on: loop, serverTLS, server: server) { connection in
            _ = connection.bytes.subscribe(error: { _ in connection.close() }, completed: { connection.close() })
            state.serverDone += 1
            if state.serverDone == count {
                state.finished = nanoseconds()
                finished.signal()
            }
        }
        defer { server.dispose() }
        guard let port else { return nil }
        @Sendable func connectNext() {
            guard state.opened < count, !state.failed else { return }
            state.opened += 1
            _ = TCP.connect(host: "127.0.0.1", port: port, tls: clientTLS).subscribe(next: { connection in
                connection.close()
                connectNext()
            }, error: { error in
                print("   (TLS connect failed: \(error))")
                state.failed = true
                finished.signal()
            })
        }
        loop.execute {
            state.started = nanoseconds()
            for _ in 0..<inFlight { connectNext() }
        }
        finished.wait()
        guard !state.failed else { return nil }
        return Double(count) / (Double(state.finished - state.started) / 1e9)
    }

    /// Idle: `count` connections, both ends ours and reading, held after their handshakes; the
    /// live heap before the first and after the last (glibc's count over every arena).
    static func idle(_ files: TLSFiles, count: Int, inFlight: Int) -> (held: Int, before: Int64, after: Int64)? {
        guard let configured = configurations(files) else { return nil }
        let (serverTLS, clientTLS) = configured
        let loop = ReactiveUV.EventLoop(name: "tls-idle")
        defer { loop.shutdown() }
        let server = SerialDisposable()
        let state = HandshakeState()
        let done = CondFlag()
        let port = listen(on: loop, serverTLS, server: server) { connection in
            _ = connection.bytes.subscribe(next: { _ in })
            state.held.append(connection)
            state.serverDone += 1
            if state.serverDone == state.target && state.clientDone == state.target { done.signal() }
        }
        defer { server.dispose() }
        guard let port else { return nil }
        @Sendable func connectNext() {
            guard state.opened < state.target, !state.failed else { return }
            state.opened += 1
            _ = TCP.connect(host: "127.0.0.1", port: port, tls: clientTLS).subscribe(next: { connection in
                _ = connection.bytes.subscribe(next: { _ in })
                state.held.append(connection)
                state.clientDone += 1
                if state.serverDone == state.target && state.clientDone == state.target { done.signal() } else { connectNext() }
            }, error: { error in
                print("   (TLS connect failed: \(error))")
                state.failed = true
                done.signal()
            })
        }
        func round(_ target: Int) {
            loop.execute {
                state.target = target
                state.opened = 0
                state.serverDone = 0
                state.clientDone = 0
                for _ in 0..<inFlight { connectNext() }
            }
            done.wait()
        }
        // A warm-up round first, closed again: what the loop and OpenSSL make once is not counted.
        round(64)
        let closedWarmup = CondFlag()
        loop.execute {
            for connection in state.held { connection.close() }
            state.held = []
            state.held.reserveCapacity(2 * count + 1)
            closedWarmup.signal()
        }
        closedWarmup.wait()
        usleep(200_000)
        let before = rawc_heap_in_use()
        round(count)
        usleep(300_000) // the session tickets read, nothing moving
        let after = rawc_heap_in_use()
        let closed = CondFlag()
        let held = state.failed ? -1 : state.serverDone
        loop.execute {
            for connection in state.held { connection.close() }
            state.held.removeAll()
            closed.signal()
        }
        closed.wait()
        return held < 0 ? nil : (held, before, after)
    }
}

/// The handshake and idle scenarios' counters.
final class HandshakeState: @unchecked Sendable {
    // Touched only on the scenario's loop thread (and read by the caller after the flag it waits for).
    var target = 0
    var opened = 0
    var serverDone = 0
    var clientDone = 0
    var failed = false
    var started: UInt64 = 0
    var finished: UInt64 = 0
    var held: [TCPConnection] = []
}

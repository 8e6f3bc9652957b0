// Single workloads for instruction counting with callgrind:
//   valgrind --tool=callgrind Profile chain 100000
// Per-item cost = (Ir(N2) − Ir(N1)) / (N2 − N1). Valgrind 3.19 cannot read the
// DWARF 5 Swift emits: run it on a copy made with `strip -g`.
import Foundation
import CBaselines
import OpenCombine
import ReactiveUV
import SimulationWorkload

enum Shared {
    nonisolated(unsafe) static var countdown: Countdown?  // set before posting; read only on the loop thread
}

final class Flag: @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var raised = false
    func raise() { condition.lock(); raised = true; condition.signal(); condition.unlock() }
    func wait() { condition.lock(); while !raised { condition.wait() }; condition.unlock() }
}

final class Countdown: @unchecked Sendable {
    // Touched only on the loop thread.
    var remaining: Int
    let done = Flag()
    init(_ count: Int) { remaining = count }
    func tick() {
        remaining -= 1
        if remaining == 0 { done.raise() }
    }
}

// PROFILE_POOL_SCHEDULING=batch|inherited|lowered:N: how libuv's pool threads start (default: automatic).
if let asked = ProcessInfo.processInfo.environment["PROFILE_POOL_SCHEDULING"] {
    switch asked {
    case "batch": try ThreadPool.setThreadScheduling(.batch)
    case "inherited": try ThreadPool.setThreadScheduling(.inherited)
    case let lowered where lowered.hasPrefix("lowered:"): try ThreadPool.setThreadScheduling(.lowered(by: Int32(lowered.dropFirst(8)) ?? 5))
    default: break
    }
}

let mode = CommandLine.arguments.dropFirst().first ?? "chain"
let count = CommandLine.arguments.dropFirst(2).first.flatMap(Int.init) ?? 100_000
let loop = ReactiveUV.EventLoop(name: "profile")

switch mode {
case "chain":
    let countdown = Countdown(count)
    @Sendable func step() {
        countdown.tick()
        if countdown.remaining > 0 { loop.execute(step) }
    }
    loop.execute(step)
    countdown.done.wait()
case "execute":
    let countdown = Countdown(count)
    for _ in 0..<count { loop.execute { countdown.tick() } }
    countdown.done.wait()
case "execute-nocapture":
    let countdown = Countdown(count)
    Shared.countdown = countdown
    for _ in 0..<count { loop.execute { Shared.countdown!.tick() } }
    countdown.done.wait()
case "rawc-execute":
    var wakeups: UInt64 = 0
    _ = rawc_execute_throughput(Int32(count), &wakeups)
case "rawc-chain":
    _ = rawc_local_chain(Int32(count))
case "operators":
    let done = Flag()
    loop.execute {
        let subject = Subject<Int>()
        let total = Countdown(0)
        let subscription = subject.map { $0 * 3 }.filter { $0 % 2 == 0 }.scan(0) { $0 &+ $1 }.subscribeNext { total.remaining = $0 }
        for value in 0..<count { subject.sendNext(value) }
        subscription.dispose()
        done.raise()
    }
    done.wait()
case "subscribe":
    let done = Flag()
    loop.execute {
        let subject = Subject<Int>()
        for _ in 0..<count { subject.subscribeNext { _ in }.dispose() }
        done.raise()
    }
    done.wait()
case "opencombine":
    let subject = PassthroughSubject<Int, Never>()
    var total = 0
    let cancellable = subject.map { $0 * 3 }.filter { $0 % 2 == 0 }.scan(0) { $0 &+ $1 }.sink { total = $0 }
    for value in 0..<count { subject.send(value) }
    cancellable.cancel()
    if total == 42 { print(total) }
case "opencombine-subscribe":
    let subject = PassthroughSubject<Int, Never>()
    for _ in 0..<count { subject.sink { _ in }.cancel() }
case "closures":
    var total = 0
    var accumulator = 0
    let sink: (Int) -> Void = { total = $0 }
    let scan: (Int) -> Void = { accumulator &+= $0; sink(accumulator) }
    let filter: (Int) -> Void = { if $0 % 2 == 0 { scan($0) } }
    let map: (Int) -> Void = { filter($0 * 3) }
    let send = hide(map)
    for value in 0..<count { send(value) }
    if total == 42 { print(total) }
case "echo":
    // Server and client on one loop; `count` round trips of 64 bytes.
    profileEchoOnOneLoop(count: count) { connection in
        _ = connection.bytes.subscribeNext { connection.send($0) }
    }
case "echo-async":
    // As `echo`, but the server echoes from a task that prefers the loop, as the async guide's
    // echo does: `for try await chunk in connection.bytes.values { connection.send(chunk) }`.
    profileEchoOnOneLoop(count: count) { connection in
        Task(executorPreference: loop) {
            do {
                for try await chunk in connection.bytes.values { connection.send(chunk) }
            } catch {
                print("echo-async: \(error)")
            }
        }
    }
case "echo-two-loops":
    // The benchmark's shape (and the C baseline's): server on `loop`, client on a loop of its own.
    let done = Flag()
    let state = EchoState(count: count, done: done)
    let clientLoop = ReactiveUV.EventLoop(name: "profile-client")
    loop.execute {
        state.server = TCPServer.serve(port: 0).subscribeNext { event in
            switch event {
            case .listening(let address):
                clientLoop.execute {
                    state.client = TCP.connect(host: "127.0.0.1", port: address.port).subscribeNext { connection in
                        _ = connection.bytes.subscribeNext { chunk in state.clientReceived(chunk.count, connection) }
                        state.startedAt = DispatchTime.now().uptimeNanoseconds
                        connection.send(state.message)
                    }
                }
            case .refused, .draining:
                break
            case .accepted(let connection):
                _ = connection.bytes.subscribeNext { connection.send($0) }
            }
        }
    }
    done.wait()
    // For A/B wall-clock runs under `taskset` (callgrind ignores it): round trips per second of the exchange.
    print("round trips/s: \(Double(count) / (Double(state.finishedAt - state.startedAt) / 1e9))")
    clientLoop.execute { state.client?.dispose() }
    loop.execute { state.server?.dispose() }
    clientLoop.shutdown()
case "pump":
    // The TCP pump's shape on one loop: `count` writes of 64 KiB, 8 in flight, until all reached the server.
    PumpState.run(count: count) { pump in
        TCPServer.serve(port: 0).subscribeNext { event in
            switch event {
            case .listening(let address):
                pump.client = TCP.connect(host: "127.0.0.1", port: address.port).subscribeNext { pump.start($0) }
            case .refused, .draining:
                break
            case .accepted(let connection):
                pump.count(connection)
            }
        }
    }
case "unix-pump":
    // The Unix-socket pump's shape on one loop (libuv's `pipe_pump`): `count` writes of 64 KiB, 8 in flight.
    let path = NSTemporaryDirectory() + "/ruv-profile-pump-\(getpid()).sock"
    PumpState.run(count: count) { pump in
        UnixSocket.serve(path: path, options: UnixSocketOptions(removeStaleSocketFile: true)).subscribeNext { event in
            switch event {
            case .listening:
                pump.client = UnixSocket.connect(path: path).subscribeNext { pump.start($0) }
            case .refused, .draining:
                break
            case .accepted(let connection):
                pump.count(connection)
            }
        }
    }
case "tls-pump":
    // The TLS bulk scenario's shape on one loop: `count` writes of 64 KiB sealed, 8 in flight, until the server decrypted all.
    let (serverTLS, clientTLS) = TLSProfileFiles.configurations()
    PumpState.run(count: count) { pump in
        TCPServer.serve(port: 0, tls: serverTLS).subscribeNext { event in
            switch event {
            case .listening(let address):
                pump.client = TCP.connect(host: "127.0.0.1", port: address.port, tls: clientTLS).subscribeNext { pump.start($0) }
            case .refused, .draining:
                break
            case .accepted(let connection):
                pump.count(connection)
            }
        }
    }
case "rawc-tls-pump":
    let (certificate, key) = TLSProfileFiles.make()
    _ = rawc_tls_pump(certificate, key, UInt64(count) * 65_536, 65_536, 8)
case "tls-handshake":
    // `count` TLS 1.3 handshakes, one at a time, both ends ours on one loop.
    profileTLSHandshakes(count: count)
case "rawc-tls-handshake":
    let (certificate, key) = TLSProfileFiles.make()
    var x25519: Int32 = 0
    _ = rawc_tls_handshakes(certificate, key, Int32(count), 1, &x25519)
case "rawc-unix-pump":
    let path = NSTemporaryDirectory() + "/ruv-profile-rawpump-\(getpid()).sock"
    unlink(path)
    _ = rawc_unix_pump(path, UInt64(count) * 65_536, 65_536, 8)
    unlink(path)
case "rawc-echo":
    // The raw C echo (server and client on two loop threads): `count` is the measured time in ms, so the
    // per-round-trip cost is ΔIr / Δ(round trips), with the round trips printed to stdout.
    var result = rawc_echo_result()
    _ = rawc_tcp_echo(64, 0, Int32(count), -1, -1, nil, 0, &result)
    print("round trips: \(result.round_trips)")
case "churn-client":
    // The churn scenario's C client alone, against a server started by hand (`ServeBenchServer ours|rawc|nio`),
    // for profiling that server: `Profile churn-client PORT MS` runs 100 in flight for MS ms and prints the count.
    let milliseconds = CommandLine.arguments.dropFirst(3).first.flatMap(Int32.init) ?? 3000
    var result = rawc_churn_result()
    _ = rawc_churn_client(Int32(count), 100, 0, milliseconds, 0, &result)
    print("connections: \(result.connections), failures: \(result.failures)")
case "timers":
    let countdown = Countdown(count)
    loop.execute {
        for index in 0..<count {
            loop.schedule(after: .milliseconds(1 + index / 1000)) { countdown.tick() }
        }
    }
    countdown.done.wait()
case "lines", "utf8lines", "lines-kept":
    // `count` chunks of 64 KiB of 80-byte lines (819.2 lines a chunk) through `lines()` or
    // `utf8Lines()` to a counting subscriber (`lines-kept`: one that holds each line until the
    // next), on the loop thread: per line = per item / 819.2.
    let chunks = lineChunks()
    let done = Flag()
    let strings = mode == "utf8lines"
    let keeps = mode == "lines-kept"
    loop.execute {
        let subject = Subject<[UInt8]>()
        let total = Countdown(0)
        let kept = KeptLine()
        let subscription = strings
            ? subject.utf8Lines().subscribeNext { total.remaining &+= $0.utf8.count }
            : keeps
            ? subject.lines().subscribeNext { line in  // holds each line until the next
                total.remaining &+= line.count
                kept.line = line
            }
            : subject.lines().subscribeNext { total.remaining &+= $0.count }
        for index in 0..<count { subject.sendNext(chunks[index % chunks.count]) }
        subject.sendCompleted()
        subscription.dispose()
        done.raise()
    }
    done.wait()
case "rawc-lines", "rawc-lines-owned":
    // The C splitters of the lines() benchmark over the same `count` chunks (per line = per item / 819.2).
    let contiguous = lineChunks().flatMap { $0 }
    var lines: UInt64 = 0, bytes: UInt64 = 0
    _ = contiguous.withUnsafeBufferPointer { all in
        mode == "rawc-lines"
            ? rawc_split_lines(all.baseAddress, 5, 65_536, Int64(count), &lines, &bytes)
            : rawc_split_lines_owned(all.baseAddress, 5, 65_536, Int64(count), &lines, &bytes)
    }
    if lines == 42 { print(bytes) }
case "stat", "rawc-stat":
    // `count` stats of one 3-byte file, 32 in flight (the "stat throughput" benchmark's shape): `Files.stat`
    // chains re-armed from their completions on the loop thread, or the C baseline.
    let path = NSTemporaryDirectory() + "reactiveuv-profile-stat-\(getpid())"
    guard FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])) else { fatalError("cannot create \(path)") }
    defer { unlink(path) }
    if mode == "rawc-stat" {
        _ = rawc_fs_stat(path, Int32(count), 32)
    } else {
        let chains = ProfileStatChains(path: path, count: count)
        loop.execute { chains.start(inflight: 32) }
        chains.done.wait()
        if chains.failed { print("a stat failed") }
    }
case "async-values":
    // `count` values of one burst through `values` (unbounded buffer) in a task that prefers the loop.
    let done = Flag()
    let burst = Signal<Int> { subscriber in
        for value in 0..<count { subscriber.sendNext(value) }
        subscriber.sendCompleted()
        return nil
    }
    Task(executorPreference: loop) {
        var sum = 0
        do { for try await value in burst.values(bufferingPolicy: .unbounded) { sum &+= value } } catch { print(error) }
        if sum == 42 { print("x") }
        done.raise()
    }
    done.wait()
case "async-calls":
    // `count` awaited nonisolated async calls that do not suspend, in a task that prefers the loop:
    // what a hop costs when the task's jobs do not run inline (LoopIsolationTests, INTERNALS).
    let done = Flag()
    Task(executorPreference: loop) {
        var sum = 0
        for value in 0..<count { sum &+= await profileAsyncIdentity(value) }
        if sum == 42 { print("x") }
        done.raise()
    }
    done.wait()
case "actor-preference":
    // `count` awaited calls to an actor on the loop from a task that prefers the loop (its code
    // nonisolated): what entering and leaving a loop actor costs such a task.
    let done = Flag()
    let actor = ProfileLoopActor(loop: loop)
    Task(executorPreference: loop) {
        for _ in 0..<count { await actor.increment() }
        done.raise()
    }
    done.wait()
case "async-stat":
    // `count` awaited `FileSystem.stat` calls from 32 tasks that prefer the loop (the "stat throughput"
    // benchmark's async contender, without its timing).
    let path = NSTemporaryDirectory() + "reactiveuv-profile-astat-\(getpid())"
    guard FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])) else { fatalError("cannot create \(path)") }
    defer { unlink(path) }
    let done = Flag()
    Task(executorPreference: loop) {
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<32 {
                group.addTask(executorPreference: loop) {
                    var index = task
                    while index < count {
                        let info = try? await FileSystem.stat(path, on: loop)
                        if info?.size != 3 { print("bad") }
                        index += 32
                    }
                }
            }
        }
        done.raise()
    }
    done.wait()
case "async-stat-isolated":
    // The same stats from 32 tasks isolated to the loop (`loop.task`).
    let path = NSTemporaryDirectory() + "reactiveuv-profile-astat-\(getpid())"
    guard FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])) else { fatalError("cannot create \(path)") }
    defer { unlink(path) }
    let remaining = Flag()
    let finished = ListTally()
    for task in 0..<32 {
        loop.task { _ in
            var index = task
            while index < count {
                let info = try? await FileSystem.stat(path, on: loop)
                if info?.size != 3 { print("bad") }
                index += 32
            }
            finished.entries += 1
            if finished.entries == 32 { remaining.raise() }
        }
    }
    remaining.wait()
case "async-resume":
    // The floor of any async form over a loop callback: `count` awaits, from 32 tasks that prefer the loop,
    // of a continuation the loop resumes from a queued closure (no I/O, no signal, no cancellation handler).
    let done = Flag()
    Task(executorPreference: loop) {
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<32 {
                group.addTask(executorPreference: loop) {
                    var index = task
                    while index < count {
                        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                            loop.execute { continuation.resume() }
                        }
                        index += 32
                    }
                }
            }
        }
        done.raise()
    }
    done.wait()
case "async-resume-cancellable":
    // `async-resume` with the cancellation handler every cancellable async form needs: the runtime's
    // floor for an awaited one-request call (no I/O, no signal).
    let done = Flag()
    Task(executorPreference: loop) {
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<32 {
                group.addTask(executorPreference: loop) {
                    var index = task
                    while index < count {
                        await withTaskCancellationHandler {
                            await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                                loop.execute { continuation.resume() }
                            }
                        } onCancel: {}
                        index += 32
                    }
                }
            }
        }
        done.raise()
    }
    done.wait()
case "list", "rawc-list", "async-list", "async-list-isolated":
    // `count` listings of one directory of 20,000 empty files (the "directory listing" benchmark's shape at a
    // fifth of its size), `Files.listBatchSize` per readdir, each name read; or the C baseline; or (async-list)
    // `for try await` over `FileSystem.list` in a task that prefers the loop. The directory
    // is made once, so (Ir(N2) − Ir(N1)) / (N2 − N1) is the cost of one listing.
    // PROFILE_LIST_DIR names a directory made beforehand (kept), so a profile shows the listing alone.
    let given = ProcessInfo.processInfo.environment["PROFILE_LIST_DIR"]
    let directory = given ?? NSTemporaryDirectory() + "reactiveuv-profile-list-\(getpid())"
    if given == nil {
        mkdir(directory, 0o755)
        for index in 0..<20_000 { close(open(directory + "/entry-\(index)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)) }
    }
    defer { if given == nil { try? FileManager.default.removeItem(atPath: directory) } }
    for _ in 0..<count {
        if mode == "rawc-list" {
            var entries: UInt64 = 0
            _ = rawc_fs_list(directory, Int32(Files.listBatchSize), &entries)
            if entries != 20_000 { print("listed \(entries)") }
        } else if mode == "async-list-isolated" {
            // The same loop in a task isolated to the loop (`loop.task`): no task executor preference to look up per hop.
            let done = Flag()
            let listed = ListTally()
            loop.task { _ in
                do {
                    for try await entry in FileSystem.list(directory, on: loop) {
                        listed.entries += 1
                        listed.nameBytes += entry.name.utf8.count
                    }
                } catch {
                    print("async-list: \(error)")
                }
                done.raise()
            }
            done.wait()
            if listed.entries != 20_000 || listed.nameBytes == 0 { print("listed \(listed.entries)") }
        } else if mode == "async-list" {
            let done = Flag()
            let listed = ListTally()
            Task(executorPreference: loop) {
                do {
                    for try await entry in FileSystem.list(directory, on: loop) {
                        listed.entries += 1
                        listed.nameBytes += entry.name.utf8.count
                    }
                } catch {
                    print("async-list: \(error)")
                }
                done.raise()
            }
            done.wait()
            if listed.entries != 20_000 || listed.nameBytes == 0 { print("listed \(listed.entries)") }
        } else {
            let done = Flag()
            let listed = ListTally()
            loop.execute {
                _ = Files.list(directory).subscribe(next: { entry in
                    listed.entries += 1
                    listed.nameBytes += entry.name.utf8.count
                }, error: { _ in done.raise() }, completed: { done.raise() })
            }
            done.wait()
            if listed.entries != 20_000 || listed.nameBytes == 0 { print("listed \(listed.entries)") }
        }
    }
case "sim-events":
    // The simulated echo world of the simulation speed benchmark, stopped after `count` callbacks
    // (from 200,000 on it is past the connects: each further event is the steady exchange).
    let figures = SimulatedEchoWorld.run(seed: 1, eventLimit: count)
    if figures.events < count { print("sim-events: the world ran out after \(figures.events) events") }
case "sim-world":
    // The same world for `count` virtual seconds, its figures printed (a wall-clock look, not for callgrind).
    let figures = SimulatedEchoWorld.run(seed: 1, size: SimulatedEchoSize(virtualTime: .seconds(count)))
    print("\(figures.virtualTime) virtual in \(Double(figures.wallNanoseconds) / 1e9) s wall: \(Int(figures.speedUp))x "
          + "(CPU \(Double(figures.cpuNanoseconds) / 1e9) s: \(Int(figures.cpuSpeedUp))x), "
          + "\(figures.events) events, \(Int(figures.nanosecondsPerEvent)) ns/event, \(figures.messagesEchoed) echoed, "
          + "\(figures.connects) connects, \(figures.connectionsLost) lost, trace \(figures.traceHash) \(figures.problems)")
default:
    print("modes: chain, execute, execute-nocapture, rawc-execute, rawc-chain, operators, subscribe, opencombine, opencombine-subscribe, closures, echo, echo-two-loops, pump, unix-pump, rawc-unix-pump, rawc-echo, timers, lines, lines-kept, utf8lines, rawc-lines, rawc-lines-owned, stat, rawc-stat, list, rawc-list, async-list, async-list-isolated, async-stat, async-stat-isolated, async-resume, async-resume-cancellable, async-calls, async-values, echo-async, actor-preference, churn-client, tls-pump, rawc-tls-pump, tls-handshake, rawc-tls-handshake, sim-events, sim-world")
}
loop.shutdown()

/// The line a `lines-kept` subscriber holds (loop thread only).
final class KeptLine: @unchecked Sendable {
    // Touched only on the loop thread.
    var line: [UInt8] = []
}

/// The benchmark's five 64 KiB chunks of 80-byte lines (79 bytes, then LF), one per phase.
func lineChunks() -> [[UInt8]] {
    (0..<5).map { phase in
        let start = phase * 65_536
        return (start..<(start + 65_536)).map { position in
            let column = position % 80
            return column == 79 ? UInt8(ascii: "\n") : UInt8(ascii: "a") + UInt8((position / 80 + column) % 26)
        }
    }
}

@inline(never)
func hide<T>(_ value: T) -> T { value }

final class PumpState: @unchecked Sendable {
    // Loop thread only, but `done` (a Flag: thread-safe).
    var server: (any Disposable)?
    var client: (any Disposable)?
    var connection: StreamConnection?
    var queued: UInt64 = 0
    var received: UInt64 = 0
    let total: UInt64
    let payload = [UInt8](repeating: 0x70, count: 65_536)
    let done = Flag()

    init(total: UInt64) { self.total = total }

    /// Runs a pump of `count` writes of 64 KiB on `loop`: `serve` starts the server (whose client calls
    /// `start` once connected, and whose accepted connection calls `count`), then waits until every byte arrived.
    static func run(count: Int, serve: @escaping @Sendable (PumpState) -> any Disposable) {
        let pump = PumpState(total: UInt64(count) * 65_536)
        loop.execute { pump.server = serve(pump) }
        pump.done.wait()
        loop.execute { pump.server?.dispose(); pump.client?.dispose() }
    }

    /// The client side: keeps 8 writes in flight.
    func start(_ connection: StreamConnection) {
        self.connection = connection
        for _ in 0..<8 { sendNext() }
    }

    /// The server side: counts what arrives until every byte has.
    func count(_ connection: StreamConnection) {
        _ = connection.bytes.subscribeNext { [self] chunk in
            received += UInt64(chunk.count)
            if received == total { done.raise() }
        }
    }

    private func sendNext() {
        guard queued < total, let connection else { return }
        queued += UInt64(payload.count)
        connection.send(payload) { [self] error in
            if error == nil { sendNext() }
        }
    }
}

/// `count` round trips of 64 bytes between a client and a server on `loop`, the server echoing each
/// accepted connection as `serve` does (called on the loop thread).
func profileEchoOnOneLoop(count: Int, serve: @escaping @Sendable (TCPConnection) -> Void) {
    let done = Flag()
    let state = EchoState(count: count, done: done)
    loop.execute {
        state.server = TCPServer.serve(port: 0).subscribeNext { event in
            switch event {
            case .listening(let address):
                state.client = TCP.connect(host: "127.0.0.1", port: address.port).subscribeNext { connection in
                    _ = connection.bytes.subscribeNext { chunk in state.clientReceived(chunk.count, connection) }
                    connection.send(state.message)
                }
            case .refused, .draining:
                break
            case .accepted(let connection):
                serve(connection)
            }
        }
    }
    done.wait()
    loop.execute { state.server?.dispose(); state.client?.dispose() }
}

final class EchoState: @unchecked Sendable {
    // Loop thread only.
    let message = [UInt8](repeating: 0x78, count: 64)
    var remaining: Int
    var received = 0
    let done: Flag
    var server: (any Disposable)?
    var client: (any Disposable)?
    var startedAt: UInt64 = 0
    var finishedAt: UInt64 = 0
    init(count: Int, done: Flag) { remaining = count; self.done = done }
    func clientReceived(_ count: Int, _ connection: TCPConnection) {
        received += count
        guard received >= 64 else { return }
        received = 0
        remaining -= 1
        if remaining == 0 {
            finishedAt = DispatchTime.now().uptimeNanoseconds
            done.raise()
        } else {
            connection.send(message)
        }
    }
}

/// `inflight` chains of `Files.stat` on the loop thread until `count` stats completed.
final class ProfileStatChains: @unchecked Sendable {
    // Touched only on the loop thread (after `start` was queued there), except `done`.
    let path: String
    var remaining: Int
    var pending = 0
    var failed = false
    let done = Flag()
    init(path: String, count: Int) {
        self.path = path
        remaining = count
    }
    func start(inflight: Int) {
        for _ in 0..<inflight where remaining > 0 { next() }
    }
    func next() {
        remaining -= 1
        pending += 1
        _ = Files.stat(path).subscribe(next: { info in
            if info.size != 3 { self.failed = true }
        }, error: { [self] _ in
            failed = true
            finish()
        }, completed: { [self] in
            finish()
        })
    }
    func finish() {
        pending -= 1
        if remaining > 0 && !failed {
            next()
        } else if pending == 0 {
            done.raise()
        }
    }
}

/// What a `list` listing saw (written on the loop thread, read after `done`).
final class ListTally: @unchecked Sendable {
    // Loop thread only until the listing's end, which the Flag orders before the main thread's read.
    var entries = 0
    var nameBytes = 0
}

/// A nonisolated async function that returns at once (never inlined, so each call is a real async call).
@inline(never)
func profileAsyncIdentity(_ value: Int) async -> Int { value }

/// An actor on the profile loop's serial executor.
actor ProfileLoopActor {
    let loop: ReactiveUV.EventLoop
    private(set) var count = 0
    init(loop: ReactiveUV.EventLoop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    func increment() { count += 1 }
}

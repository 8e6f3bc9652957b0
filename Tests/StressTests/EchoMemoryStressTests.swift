import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Resident memory per client that sends without ever reading its echo, for the
/// built `echo` (signals) and `echo-async` (async/await) samples.
///
/// Each server gets `STRESS_CLIENTS` (default 200, scaled by `STRESS_SCALE`) such clients. Each client sends
/// until its send buffer stays full (the server stopped reading it), then the test
/// waits until the server is idle: a round of non-blocking sends on every client
/// moves no byte and the server used no CPU since the previous round. The figure is
/// (peak resident memory − resident memory with the same clients connected and
/// silent) / clients. `STRESS_SAMPLE_DIR` runs the samples of another build (e.g.
/// `.build/release`). `echo-async` must stay within 2× `echo`: reading pauses on the
/// bytes waiting in `bytes.values` plus the write queue, not on a count of chunks.
final class EchoMemoryStressTests: XCTestCase {
    func testANonReadingClientCostsEchoAsyncAtMostTwiceWhatItCostsEcho() throws {
        let clients = environmentInt("STRESS_CLIENTS", default: scaled(200, minimum: 20))
        try ensureOpenFileLimit(clients + 100)
        let echo = try residentBytesPerFloodingClient(sample: "echo", clients: clients)
        let async = try residentBytesPerFloodingClient(sample: "echo-async", clients: clients)
        print("stress: resident memory per client that sends and never reads, \(clients) clients: "
              + "echo \(mebibytes(echo)), echo-async \(mebibytes(async))")
        XCTAssertLessThanOrEqual(async, 2 * echo,
                                 "echo-async holds \(mebibytes(async)) per non-reading client, echo \(mebibytes(echo))")
    }

    /// Starts `sample`, connects `clients` clients, floods them, and returns the resident bytes each added.
    private func residentBytesPerFloodingClient(sample: String, clients count: Int) throws -> Int {
        let server = try SampleServer(sample)
        defer { server.stop() }
        let port = try server.waitForPort()
        let clients = try (0..<count).map { _ in try BlockingClient(port: port) }
        defer { for client in clients { client.reset() } }
        try waitFor("\(sample) to report \(count) clients", timeout: .seconds(60), observed: server.output) {
            server.output.contains("(\(count) open)")
        }
        let idle = try server.residentBytes()

        // Every client sends until a send makes no progress for a second: its buffers are full.
        let chunk = bytePattern(64 << 10, seed: 5)
        let finished = Locked(0)
        for (index, client) in clients.enumerated() {
            try client.setSendTimeout(.seconds(1))
            spawn("flood-\(index)") {
                while client.send(chunk) == chunk.count {}
                finished.withLock { $0 += 1 }
            }
        }
        try waitFor("every client's send buffer to fill", timeout: .seconds(600), observed: "\(finished.current) of \(count)") {
            finished.current == count
        }
        // Then until the server has stopped: no client can send a byte and the server used no CPU.
        var cpu = try server.cpuTicks()
        try waitFor("\(sample) to stop reading every client", timeout: .seconds(300)) {
            let moved = clients.reduce(0) { $0 + $1.sendWithoutWaiting(chunk) }
            usleep(200_000)  // an interval to measure the server's CPU over, not a wait for an event
            let now = (try? server.cpuTicks()) ?? -1
            defer { cpu = now }
            return moved == 0 && now == cpu
        }
        // The peak, not the final figure: memory the allocator took back after a burst still had to fit.
        let flooded = try server.residentBytes(peak: true)
        print("stress: \(sample): \(mebibytes(idle)) resident with \(count) silent clients, "
              + "peak \(mebibytes(flooded)) once they flooded it without reading (now \(mebibytes(try server.residentBytes())))")
        return max(0, flooded - idle) / count
    }
}

/// A built sample server (`echo` or `echo-async` with `--port 0`), its output collected.
private final class SampleServer: @unchecked Sendable {
    // `collected` is protected by its lock; `process` is used from the test thread only.
    private let process = Process()
    private let collected = Locked(Data())

    init(_ name: String) throws {
        // STRESS_SAMPLE_DIR measures other builds (`.build/release`); by default, the samples built with the tests.
        let bundle = ProcessInfo.processInfo.environment["STRESS_SAMPLE_DIR"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let url = [bundle, bundle.deletingLastPathComponent()].map { $0.appendingPathComponent(name) }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
        guard let url else {
            throw StressFailure("sample \(name) not built next to \(bundle.path): run `swift build` first")
        }
        process.executableURL = url
        process.arguments = ["--port", "0"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let handle = pipe.fileHandleForReading
        let collected = self.collected
        spawn("\(name)-output") {
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                collected.withLock { $0.append(data) }
            }
        }
    }

    var output: String { String(decoding: collected.current, as: UTF8.self) }

    func waitForPort() throws -> Int {
        try waitFor("the server to listen", timeout: .seconds(30), observed: output) { output.contains("listening on") }
        let line = output.split(separator: "\n").first { $0.contains("listening on") } ?? ""
        guard let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw StressFailure("no port in '\(line)'")
        }
        return port
    }

    /// VmRSS (or with `peak`, VmHWM: the highest it has been) from `/proc/PID/status`.
    func residentBytes(peak: Bool = false) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
        let field = peak ? "VmHWM:" : "VmRSS:"
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
              let kibibytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else {
            throw StressFailure("no VmRSS in /proc/\(process.processIdentifier)/status")
        }
        return kibibytes << 10
    }

    /// User plus system CPU time, in clock ticks (`/proc/PID/stat` fields 14 and 15).
    func cpuTicks() throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8)
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else {
            throw StressFailure("unexpected /proc/\(process.processIdentifier)/stat: \(stat)")
        }
        return user + system
    }

    /// Ctrl-C, and waits for the exit.
    func stop() {
        guard process.isRunning else { return }
        process.interrupt()
        process.waitUntilExit()
    }
}

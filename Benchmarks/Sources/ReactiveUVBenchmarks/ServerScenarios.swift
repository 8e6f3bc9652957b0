import CBaselines
import Foundation

/// The server scenarios: connection churn (libuv's `tcp4_pound` shape) and the memory
/// of idle connections, ours against raw libuv C, SwiftNIO and Node.
///
/// Every contender's echo server runs in a process of its own (`ServeBenchServer ours|rawc|nio`,
/// `node/churn_server.js`), one serving thread each, so that the CPU time and resident memory
/// read from /proc are the server's alone; the client is the same C code for all, in this
/// process. With two or more cores the server is started pinned to CPU 0 (its threads inherit
/// that) and the client thread runs pinned to CPU 1.
enum ServerScenarios {
    static let inFlight = 100

    enum Server: CaseIterable {
        case ours, oursBytes, rawC, nio, node

        var contender: String {
            switch self {
            case .ours: return Contender.ours
            case .oursBytes: return Contender.oursBytes
            case .rawC: return Contender.rawC
            case .nio: return Contender.nio
            case .node: return Contender.node
            }
        }

        var what: String {
            switch self {
            case .ours: return "TCPServer.serve on one loop, every connection read by one StreamReader (read(with:))"
            case .oursBytes: return "TCPServer.serve on one loop, a bytes subscription per connection"
            case .rawC: return "uv_tcp, malloc'd buffer per read"
            case .nio: return "ServerBootstrap, 1 thread"
            case .node: return "net.createServer"
            }
        }

        /// `ServeBenchServer`'s first argument for this server (Node's runs apart).
        var processArgument: String {
            switch self {
            case .ours: return "ours"
            case .oursBytes: return "ours-bytes"
            case .rawC: return "rawc"
            case .nio, .node: return "nio"
            }
        }
    }

    /// A server in a process of its own, its port read from its first line.
    final class RunningServer {
        let process: Process
        let port: Int
        /// The server's standard input: it exits when this ends (so also if the benchmark dies).
        let lifeline: Pipe
        var pid: Int32 { process.processIdentifier }

        init(process: Process, port: Int, lifeline: Pipe) {
            self.process = process
            self.port = port
            self.lifeline = lifeline
        }

        func stop() {
            process.terminate()
            process.waitUntilExit()
        }
    }

    static var pinning: Bool { ProcessInfo.processInfo.activeProcessorCount >= 2 }

    static func launch(_ server: Server) -> RunningServer? {
        let process = Process()
        switch server {
        case .node:
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("node/churn_server.js")
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["node", script.path]
        default:
            guard let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
            process.executableURL = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("ServeBenchServer")
            process.arguments = [server.processArgument, "--exit-at-stdin-eof"]
        }
        let output = Pipe()
        let lifeline = Pipe()
        process.standardOutput = output
        process.standardInput = lifeline
        // The child inherits the affinity of the thread that spawns it.
        if pinning { pinCurrentThread(to: 0) }
        defer { if pinning { pinCurrentThread(to: nil) } }
        do { try process.run() } catch {
            print("   (could not start the \(server.contender) server: \(error))")
            return nil
        }
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            print("   (the \(server.contender) server printed no port)")
            process.terminate()
            process.waitUntilExit()
            return nil
        }
        return RunningServer(process: process, port: port, lifeline: lifeline)
    }

    // MARK: connection churn

    struct ChurnFigures {
        var connectionsPerSecond: Double
        var serverMicrosecondsPerConnection: Double?
        /// The user-space part of it (the rest is the kernel's).
        var serverUserMicrosecondsPerConnection: Double?
        var clientCores: Double
    }

    static func churnOnce(_ server: Server, warmup: Int, measure: Int) -> ChurnFigures? {
        guard let running = launch(server) else { return nil }
        defer { running.stop() }
        if pinning { pinCurrentThread(to: 1) }
        defer { if pinning { pinCurrentThread(to: nil) } }
        var result = rawc_churn_result()
        guard rawc_churn_client(Int32(running.port), Int32(inFlight), Int32(warmup), Int32(measure), running.pid, &result) == 0,
              result.elapsed_ns > 0, result.connections > 0 else {
            print("   (churn against \(server.contender) failed)")
            return nil
        }
        if result.failures > 0 { print("   (\(result.failures) connections to \(server.contender) failed)") }
        let connections = Double(result.connections)
        return ChurnFigures(
            connectionsPerSecond: connections / (Double(result.elapsed_ns) / 1e9),
            serverMicrosecondsPerConnection: result.server_cpu_ns >= 0 ? Double(result.server_cpu_ns) / 1000 / connections : nil,
            serverUserMicrosecondsPerConnection: result.server_user_ns >= 0 ? Double(result.server_user_ns) / 1000 / connections : nil,
            clientCores: Double(result.client_cpu_ns) / Double(result.elapsed_ns))
    }

    /// `rounds` rounds, each running every contender once (the order rotated per round);
    /// medians. Two results: connections per second (the target) and the server's CPU time
    /// per connection (steadier on a shared machine).
    static func churn(rounds: Int, warmup: Int, measure: Int) -> [ScenarioResult] {
        var runs: [Server: [ChurnFigures]] = [:]
        var rateRatios: [Double] = [], cpuRatios: [Double] = []
        let servers = Server.allCases
        for round in 0..<rounds {
            var thisRound: [Server: ChurnFigures] = [:]
            for index in 0..<servers.count {
                let server = servers[(index + round) % servers.count]
                if let figures = churnOnce(server, warmup: warmup, measure: measure) {
                    runs[server, default: []].append(figures)
                    thisRound[server] = figures
                }
            }
            if let ours = thisRound[.ours], let c = thisRound[.rawC] {
                rateRatios.append(ours.connectionsPerSecond / c.connectionsPerSecond)
                if let oursCPU = ours.serverMicrosecondsPerConnection, let cCPU = c.serverMicrosecondsPerConnection, cCPU > 0 {
                    cpuRatios.append(oursCPU / cCPU)
                }
            }
        }
        let listRatios = { (ratios: [Double]) in ratios.map { format($0) }.joined(separator: ", ") }
        var rates: [Measurement] = [], costs: [Measurement] = []
        for server in servers {
            guard let figures = runs[server], !figures.isEmpty else { continue }
            let rate = figures.map { $0.connectionsPerSecond / 1000 }
            let cpu = figures.compactMap { $0.serverMicrosecondsPerConnection }
            let user = figures.compactMap { $0.serverUserMicrosecondsPerConnection }
            let pairs = server == .ours ? "; ours ÷ C per round \(listRatios(rateRatios))" : ""
            rates.append(Measurement(server.contender, median(rate),
                                     detail: "\(server.what); median of \(figures.count): \(rate.map { format($0) }.joined(separator: ", "))\(pairs); client \(format(median(figures.map { $0.clientCores }) * 100))% of a core"))
            if !cpu.isEmpty {
                let cpuPairs = server == .ours ? "; ours ÷ C per round \(listRatios(cpuRatios))" : ""
                costs.append(Measurement(server.contender, median(cpu),
                                         detail: "\(server.what); median of \(cpu.count): \(cpu.map { format($0) }.joined(separator: ", "))\(cpuPairs); user space \(format(median(user))) µs (runs \(user.map { format($0) }.joined(separator: ", ")))"))
            }
        }
        let placement = pinning ? "server pinned to CPU 0, client to CPU 1" : "one core: not pinned"
        return [
            ScenarioResult(
                name: "Connection churn",
                workload: "\(inFlight) connections in flight from one C client loop, each: connect, 64 bytes echoed, close; each server in its own process, one thread; \(placement); \(measure) ms after \(warmup) ms, \(rounds) rounds",
                unit: "k connections/s", higherIsBetter: true, target: (Contender.rawC, 0.9), measurements: rates),
            ScenarioResult(
                name: "Connection churn, server CPU",
                workload: "the server process's CPU time (user + system, /proc, 10 ms ticks) over the measured window ÷ connections completed; its user-space part in the detail",
                unit: "µs/connection", higherIsBetter: false, target: (Contender.rawC, 1 / 0.9), measurements: costs),
        ]
    }

    // MARK: idle connections

    struct IdleFigures {
        var bytesPerConnection: Double
        var opened: Int
        var rssBefore: Int64
        var rssAfter: Int64
    }

    static func idleOnce(_ server: Server, count: Int) -> IdleFigures? {
        guard let running = launch(server) else { return nil }
        defer { running.stop() }
        usleep(300_000) // let the server finish starting (Node compiles, NIO spins up) before the first reading
        let descriptorsBefore = rawc_process_descriptor_count(running.pid)
        let rssBefore = rawc_process_rss_bytes(running.pid)
        var descriptors = [Int32](repeating: -1, count: count)
        let opened = Int(rawc_idle_open(Int32(running.port), Int32(count), &descriptors))
        guard opened > 0 else {
            print("   (no idle connection to \(server.contender) opened: errno \(-opened))")
            return nil
        }
        defer { rawc_idle_close(descriptors, Int32(opened)) }
        if opened < count { print("   (only \(opened) of \(count) idle connections to \(server.contender) opened)") }
        // Wait until the server accepted every connection (its descriptors say so), then settle.
        let deadline = nanoseconds() + 30_000_000_000
        while rawc_process_descriptor_count(running.pid) < descriptorsBefore + Int32(opened) && nanoseconds() < deadline {
            usleep(10_000)
        }
        let accepted = Int(rawc_process_descriptor_count(running.pid) - descriptorsBefore)
        if accepted < opened { print("   (\(server.contender) accepted only \(accepted) of \(opened) connections in 30 s)") }
        usleep(500_000)
        let rssAfter = rawc_process_rss_bytes(running.pid)
        guard rssBefore > 0, rssAfter > 0 else { return nil }
        return IdleFigures(bytesPerConnection: Double(rssAfter - rssBefore) / Double(opened), opened: opened,
                           rssBefore: rssBefore, rssAfter: rssAfter)
    }

    static func idle(count wanted: Int, rounds: Int) -> ScenarioResult {
        // Each side of a connection needs a descriptor; the client's are in this process.
        let limit = Int(rawc_raise_descriptor_limit(Int32(wanted + 256)))
        let count = min(wanted, max(limit - 256, 1))
        var runs: [Server: [IdleFigures]] = [:]
        var ratios: [Double] = []
        let servers = Server.allCases
        for round in 0..<rounds {
            var thisRound: [Server: IdleFigures] = [:]
            for index in 0..<servers.count {
                let server = servers[(index + round) % servers.count]
                if let figures = idleOnce(server, count: count) {
                    runs[server, default: []].append(figures)
                    thisRound[server] = figures
                }
            }
            if let ours = thisRound[.ours], let c = thisRound[.rawC], c.bytesPerConnection > 0 {
                ratios.append(ours.bytesPerConnection / c.bytesPerConnection)
            }
        }
        var measurements: [Measurement] = []
        for server in servers {
            guard let figures = runs[server], !figures.isEmpty else { continue }
            let perConnection = figures.map { $0.bytesPerConnection }
            let pairs = server == .ours ? "; ours ÷ C per round \(ratios.map { format($0) }.joined(separator: ", "))" : ""
            let last = figures[figures.count - 1]
            measurements.append(Measurement(server.contender, median(perConnection),
                                            detail: "\(server.what); median of \(figures.count): \(perConnection.map { format($0) }.joined(separator: ", "))\(pairs); RSS \(last.rssBefore / 1024) → \(last.rssAfter / 1024) KiB"))
        }
        let note = count < wanted ? " (descriptor limit \(limit): \(wanted) impossible)" : ""
        return ScenarioResult(
            name: "Idle connections",
            workload: "\(count) open, silent connections\(note) to each server in its own process, one thread; (RSS after − RSS before) ÷ connections, read from /proc once the server holds them all, 0.5 s later; \(rounds) rounds",
            unit: "bytes/connection", higherIsBetter: false, target: (Contender.rawC, 1.5), measurements: measurements)
    }
}

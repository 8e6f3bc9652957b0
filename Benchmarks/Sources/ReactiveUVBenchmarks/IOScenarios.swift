import CBaselines
import Foundation

enum IOScenarios {
    /// Scenario 5a: TCP echo ping-pong, 64-byte messages, one connection.
    static func echo(warmup: Int, measure: Int, serverCPU: Int?, clientCPU: Int?, ours: (() -> EchoFigures?)?,
                     oursAsync: (() -> EchoFigures?)? = nil) -> ScenarioResult {
        var measurements: [Measurement] = []
        func add(_ name: String, _ figures: EchoFigures?, _ detail: String) {
            guard let figures else { return }
            measurements.append(Measurement(name, figures.roundTripsPerSecond / 1000,
                                            detail: "median \(format(figures.medianMicroseconds)) µs; \(detail)"))
        }
        if let ours { add(Contender.ours, ours(), "TCPServer/TCP.connect") }
        if let oursAsync { add(Contender.oursAsync, oursAsync(), "the server a task: for try await chunk in connection.bytes.values") }
        add(Contender.rawC, TCPAnchors.rawEcho(size: 64, warmup: warmup, measure: measure, serverCPU: serverCPU, clientCPU: clientCPU), "uv_tcp")
        add(Contender.nio, TCPAnchors.nioEcho(size: 64, warmup: warmup, measure: measure, serverCPU: serverCPU, clientCPU: clientCPU), "ServerBootstrap/ClientBootstrap")
        add(Contender.node, TCPAnchors.nodeEcho(size: 64, warmup: warmup, measure: measure, serverCPU: serverCPU, clientCPU: clientCPU), "net")
        let placement = serverCPU == clientCPU ? "both pinned to CPU \(serverCPU.map(String.init) ?? "-")" : "server on CPU \(serverCPU.map(String.init) ?? "any"), client on CPU \(clientCPU.map(String.init) ?? "any")"
        return ScenarioResult(
            name: "TCP echo ping-pong (\(serverCPU == clientCPU ? "one CPU" : "two CPUs"))",
            workload: "one loopback connection, one 64-byte message in flight, \(measure) ms after \(warmup) ms warm-up, \(placement)",
            unit: "k round trips/s", higherIsBetter: true, target: (Contender.rawC, 0.9), measurements: measurements)
    }

    /// Unix-socket echo ping-pong: scenario 5a's workload over a Unix-domain socket, ours against raw libuv C in one run.
    static func unixEcho(warmup: Int, measure: Int, serverCPU: Int?, clientCPU: Int?,
                         ours: ((String) -> EchoFigures?)?) -> ScenarioResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ruv-bench-unix-echo-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var measurements: [Measurement] = []
        func add(_ name: String, _ figures: EchoFigures?, _ detail: String) {
            guard let figures else { return }
            measurements.append(Measurement(name, figures.roundTripsPerSecond / 1000,
                                            detail: "median \(format(figures.medianMicroseconds)) µs; \(detail)"))
        }
        if let ours { add(Contender.ours, ours(directory.appendingPathComponent("ours.sock").path), "UnixSocket.serve/connect") }
        let rawPath = directory.appendingPathComponent("raw.sock").path
        var latencies = [UInt64](repeating: 0, count: 2_000_000)
        var result = rawc_echo_result()
        let status = rawc_unix_echo(rawPath, 64, Int32(warmup), Int32(measure), Int32(serverCPU ?? -1), Int32(clientCPU ?? -1),
                                    &latencies, UInt64(latencies.count), &result)
        unlink(rawPath)
        if status == 0, result.elapsed_ns > 0 {
            let sorted = Array(latencies.prefix(Int(result.recorded))).sorted()
            add(Contender.rawC, EchoFigures(roundTripsPerSecond: Double(result.round_trips) / (Double(result.elapsed_ns) / 1e9),
                                            medianMicroseconds: percentile(sorted, 0.5) / 1000), "uv_pipe_t")
        }
        let placement = serverCPU == clientCPU ? "both pinned to CPU \(serverCPU.map(String.init) ?? "-")" : "server on CPU \(serverCPU.map(String.init) ?? "any"), client on CPU \(clientCPU.map(String.init) ?? "any")"
        return ScenarioResult(
            name: "Unix-socket echo ping-pong (\(serverCPU == clientCPU ? "one CPU" : "two CPUs"))",
            workload: "one Unix-domain socket connection, one 64-byte message in flight, \(measure) ms after \(warmup) ms warm-up, \(placement)",
            unit: "k round trips/s", higherIsBetter: true, target: (Contender.rawC, 0.9), measurements: measurements)
    }

    /// Scenario 5b: TCP pump, 64 KiB writes, 8 in flight.
    static func pump(total: UInt64, ours: (() -> Double?)?) -> ScenarioResult {
        var measurements: [Measurement] = []
        if let ours, let rate = ours() { measurements.append(Measurement(Contender.ours, rate, detail: "TCPConnection.write")) }
        measurements.append(Measurement(Contender.rawC, TCPAnchors.rawPump(total: total), detail: "uv_write"))
        return ScenarioResult(
            name: "TCP pump",
            workload: "one loopback connection, 8 writes of 64 KiB in flight, TCP_NODELAY, \(total >> 20) MiB",
            unit: "MB/s", higherIsBetter: true, target: (Contender.rawC, 0.9), measurements: measurements)
    }

    /// Unix-socket pump (libuv's `pipe_pump`): the TCP pump's workload over a Unix-domain socket.
    ///
    /// One pass of 4 GiB takes under a second, and a second tenant's burst moved one side's figure by
    /// 10–15 % between runs; so both sides run `rounds` times, alternating which goes first, and each
    /// reports its median round.
    static func unixPump(total: UInt64, rounds: Int = 5, ours: ((String) -> Double?)?) -> ScenarioResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ruv-bench-unix-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var oursRates: [Double] = [], rawRates: [Double] = []
        func runOurs() {
            if let ours, let rate = ours(directory.appendingPathComponent("ours.sock").path) { oursRates.append(rate) }
        }
        func runRaw() {
            let rawPath = directory.appendingPathComponent("raw.sock").path
            let elapsed = rawc_unix_pump(rawPath, total, 65_536, 8)
            unlink(rawPath)
            if elapsed > 0 { rawRates.append(Double(total) / 1e6 / (Double(elapsed) / 1e9)) }
        }
        for round in 0..<rounds {
            if round % 2 == 0 { runOurs(); runRaw() } else { runRaw(); runOurs() }
        }
        var measurements: [Measurement] = []
        if !oursRates.isEmpty {
            measurements.append(Measurement(Contender.ours, median(oursRates), detail: "UnixConnection.send(_:completion:); median of \(oursRates.count)"))
        }
        measurements.append(Measurement(Contender.rawC, rawRates.isEmpty ? 0 : median(rawRates), detail: "uv_pipe_t, uv_write; median of \(rawRates.count)"))
        return ScenarioResult(
            name: "Unix-socket pump",
            workload: "one Unix-domain socket connection, 8 writes of 64 KiB in flight, \(total >> 20) MiB; \(rounds) rounds, alternating which side goes first",
            unit: "MB/s", higherIsBetter: true, target: (Contender.rawC, 0.9), measurements: measurements)
    }

    /// Scenario 5c: file-watch latency, write to event delivered.
    static func fileWatch(count: Int, ours: ((String, String, Int) -> [UInt64]?)?) -> ScenarioResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ruv-bench-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("watched").path
        var measurements: [Measurement] = []
        func add(_ name: String, _ latencies: [UInt64]?, _ detail: String) {
            guard let latencies, !latencies.isEmpty else { return }
            let sorted = latencies.sorted()
            measurements.append(Measurement(name, percentile(sorted, 0.5) / 1000,
                                            detail: "p99 \(format(percentile(sorted, 0.99) / 1000)) µs; \(detail)"))
        }
        if let ours { add(Contender.ours, ours(directory.path, file, count), "FileWatch.changes") }
        var raw = [UInt64](repeating: 0, count: count)
        let status = rawc_fs_event_latency(directory.path, file, Int32(count), &raw)
        add(Contender.rawC, status == 0 ? raw : nil, "uv_fs_event")
        return ScenarioResult(
            name: "file-watch latency",
            workload: "\(count) one-byte pwrites to a file in a watched directory; time from the write until the event was delivered (median)",
            unit: "µs", higherIsBetter: false, target: nil, measurements: measurements)
    }
}

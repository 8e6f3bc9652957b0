import CBaselines
import Foundation

/// A self-signed ECDSA P-256 certificate for "localhost" and its key, made with the `openssl`
/// command in a temporary directory (removed by `remove()`).
struct TLSFiles {
    let directory: String
    var certificate: String { directory + "/cert.pem" }
    var key: String { directory + "/key.pem" }

    static func make() -> TLSFiles? {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ruv-bench-tls-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let files = TLSFiles(directory: directory)
        let steps = [
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", files.key],
            ["req", "-x509", "-new", "-key", files.key, "-out", files.certificate, "-days", "2", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost"],
        ]
        for step in steps {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl"] + step
            process.standardError = FileHandle.nullDevice
            do { try process.run() } catch {
                print("   (cannot run openssl: \(error))")
                return nil
            }
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                print("   (openssl \(step[0]) failed)")
                return nil
            }
        }
        return files
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

/// The TLS scenarios: bulk throughput, handshakes per second, memory per idle connection; ours
/// against raw C (libuv + the system's OpenSSL through memory BIOs, `tls_bench.c`), SwiftNIO +
/// NIOSSL (BoringSSL) and Node's `tls`, in one run. Every contender runs server and client in one
/// thread over loopback, TLS 1.3 with X25519 and the same ECDSA P-256 certificate.
enum TLSScenarios {
    static let workloadCommon = "loopback, server and client on one thread, TLS 1.3 (X25519, ECDSA P-256 certificate), client verifying chain and name"

    /// Runs each contender `rounds` times, rotating which goes first: every figure, by contender,
    /// and ours ÷ raw C within each round (the pair ran back to back, so a neighbour's burst moves
    /// both less than it moves the medians).
    /// With `work` (bytes in MB, or handshakes), also that work per CPU second of this process and
    /// its children (getrusage), which a neighbour taking the CPU moves less than the wall clock.
    static func interleaved(rounds: Int, work: Double? = nil, _ contenders: [(String, () -> Double?)]) -> (figures: [String: [Double]], pairs: [Double], perCPU: [String: [Double]]) {
        var figures: [String: [Double]] = [:]
        var perCPU: [String: [Double]] = [:]
        var pairs: [Double] = []
        for round in 0..<rounds {
            var thisRound: [String: Double] = [:]
            for index in 0..<contenders.count {
                let (name, run) = contenders[(index + round) % contenders.count]
                let cpuBefore = cpuSeconds()
                if let value = run(), value > 0 {
                    figures[name, default: []].append(value)
                    thisRound[name] = value
                    let cpu = cpuSeconds() - cpuBefore
                    if let work, cpu > 0 { perCPU[name, default: []].append(work / cpu) }
                }
            }
            if let ours = thisRound[Contender.ours], let c = thisRound[Contender.rawCTLS] { pairs.append(ours / c) }
        }
        return (figures, pairs, perCPU)
    }

    /// User + system CPU seconds of this process and its waited-for children.
    static func cpuSeconds() -> Double {
        var total = 0.0
        for who in [RUSAGE_SELF, RUSAGE_CHILDREN] {
            var usage = rusage()
            getrusage(__rusage_who_t(who.rawValue), &usage)
            total += Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }
        return total
    }

    static func measurements(_ run: (figures: [String: [Double]], pairs: [Double], perCPU: [String: [Double]]), unit: String = "",
                             _ details: [(String, String)]) -> [Measurement] {
        let cCPU = run.perCPU[Contender.rawCTLS].map(median)
        return details.compactMap { name, detail in
            guard let values = run.figures[name], !values.isEmpty else { return nil }
            let pairs = name == Contender.ours && !run.pairs.isEmpty
                ? "; ours ÷ C per round \(run.pairs.map { format($0) }.joined(separator: ", "))" : ""
            var cpu = ""
            if let perCPU = run.perCPU[name], !perCPU.isEmpty {
                cpu = "; \(format(median(perCPU))) \(unit) per CPU second"
                if name == Contender.ours, let cCPU, cCPU > 0 { cpu += " (\(format(median(perCPU) / cCPU))× C's)" }
            }
            return Measurement(name, median(values), detail: "\(detail); median of \(values.count): \(values.map { format($0) }.joined(separator: ", "))\(pairs)\(cpu)")
        }
    }

    static func bulk(total: UInt64, rounds: Int) -> ScenarioResult {
        var measurements: [Measurement] = []
        if let files = TLSFiles.make() {
            defer { files.remove() }
            var agreed = "?"
            let figures = interleaved(rounds: rounds, work: Double(total) / 1e6, [
                (Contender.ours, {
                    guard let figures = TLSOurs.pump(files, total: total) else { return nil }
                    agreed = figures.agreed
                    return figures.rate
                }),
                (Contender.rawCTLS, {
                    let elapsed = rawc_tls_pump(files.certificate, files.key, total, 65_536, 8)
                    return elapsed == 0 ? nil : Double(total) / 1e6 / (Double(elapsed) / 1e9)
                }),
                (Contender.nio, { TLSAnchors.nioPump(files, total: total) }),
                (Contender.node, { runNode("tls_bench.js", ["bulk", files.certificate, files.key, String(total)])?["rate"] }),
            ])
            measurements = self.measurements(figures, unit: "MB", [
                (Contender.ours, "TCPServer.serve(tls:) + TCP.connect(tls:), send(_:completion:); \(agreed)"),
                (Contender.rawCTLS, "uv_tcp + SSL_write_ex/SSL_read_ex between memory BIOs"),
                (Contender.nio, "NIOSSLClientHandler/NIOSSLServerHandler, 1 thread"),
                (Contender.node, "tls.createServer/tls.connect"),
            ])
        }
        return ScenarioResult(
            name: "TLS bulk throughput",
            workload: "one connection, 8 writes of 64 KiB in flight, \(total >> 20) MiB decrypted by the server; \(workloadCommon); \(rounds) rounds, rotating who goes first",
            unit: "MB/s", higherIsBetter: true, target: (Contender.rawCTLS, 0.9), measurements: measurements)
    }

    static func handshakes(count: Int, rounds: Int) -> ScenarioResult {
        var measurements: [Measurement] = []
        let inFlight = 4
        if let files = TLSFiles.make() {
            defer { files.remove() }
            var x25519 = 0
            let figures = interleaved(rounds: rounds, work: Double(count), [
                (Contender.ours, { TLSOurs.handshakes(files, count: count, inFlight: inFlight) }),
                (Contender.rawCTLS, {
                    var agreed: Int32 = 0
                    let elapsed = rawc_tls_handshakes(files.certificate, files.key, Int32(count), Int32(inFlight), &agreed)
                    x25519 = Int(agreed)
                    return elapsed == 0 ? nil : Double(count) / (Double(elapsed) / 1e9)
                }),
                (Contender.nio, { TLSAnchors.nioHandshakes(files, count: count, inFlight: inFlight) }),
                (Contender.node, { runNode("tls_bench.js", ["handshakes", files.certificate, files.key, String(count), String(inFlight)])?["rate"] }),
            ])
            measurements = self.measurements(figures, unit: "handshakes", [
                (Contender.ours, "TCP.connect(tls:) then close(); the server closes at the end of bytes"),
                (Contender.rawCTLS, "SSL_do_handshake between memory BIOs, SSL_shutdown; X25519 in \(x25519) of \(count)"),
                (Contender.nio, "NIOSSL handlers, 1 thread"),
                (Contender.node, "tls.connect, socket.end()"),
            ])
        }
        return ScenarioResult(
            name: "TLS handshakes per second",
            workload: "\(count) new connections, \(inFlight) at a time, each closed once its handshake finished; timed until the server finished the last; \(workloadCommon); \(rounds) rounds",
            unit: "handshakes/s", higherIsBetter: true, target: (Contender.rawCTLS, 0.9), measurements: measurements)
    }

    static func idle(count wanted: Int, rounds: Int) -> ScenarioResult {
        // Both ends of each connection are in this process.
        let limit = Int(rawc_raise_descriptor_hard_limit(Int32(2 * wanted + 256)))
        let count = min(wanted, max((limit - 64) / 2, 1))
        var measurements: [Measurement] = []
        let inFlight = 16
        if let files = TLSFiles.make() {
            defer { files.remove() }
            let figures = interleaved(rounds: rounds, [
                (Contender.ours, {
                    guard let figures = TLSOurs.idle(files, count: count, inFlight: inFlight), figures.held == count else { return nil }
                    return Double(figures.after - figures.before) / Double(figures.held)
                }),
                (Contender.rawCTLS, {
                    var before: Int64 = 0, after: Int64 = 0
                    let held = rawc_tls_idle(files.certificate, files.key, Int32(count), Int32(inFlight), &before, &after)
                    return held == count ? Double(after - before) / Double(held) : nil
                }),
            ])
            measurements = self.measurements(figures, [
                (Contender.ours, "TCPServer.serve(tls:) + TCP.connect(tls:), a bytes subscription on each end"),
                (Contender.rawCTLS, "uv_tcp + SSL + 2 memory BIOs per end, reading, SSL_MODE_RELEASE_BUFFERS"),
            ])
        }
        let note = count < wanted ? " (descriptor limit \(limit): \(wanted) impossible)" : ""
        return ScenarioResult(
            name: "Idle TLS connections memory",
            workload: "\(count) connections\(note) held after their handshakes, both ends in this process and reading; (live heap after − before, glibc mallinfo2 over every arena) ÷ connections, so a figure is one client end plus one server end; \(rounds) rounds",
            unit: "B/connection", higherIsBetter: false, target: (Contender.rawCTLS, 1.5), measurements: measurements)
    }
}

import Foundation

/// The built samples against the system tools that do the same job, as a user would run them.
enum SampleScenarios {
    /// The `lines` sample numbering a file's lines from a pipe into a pipe, beside `nl` and `cat -n`
    /// on the same input in the same run: `cat INPUT | PROGRAM | cat > /dev/null`, wall clock.
    ///
    /// The input is `bytes` of lines of 20 to 119 bytes (about 70 on average), made in the
    /// temporary directory for the run and removed after it. The three run one after the other in each of `rounds` rounds, and each
    /// row is the median of its rounds; the detail gives the range and the CPU time (user and system,
    /// the whole pipeline). The sample is the release build in the root package
    /// (`swift build -c release --product lines`, which `Benchmarks/run` does), or `LINES_SAMPLE`.
    static func lines(bytes: Int, rounds: Int) -> ScenarioResult {
        let workload = "number the lines of \(bytes >> 20) MiB (lines of 20-119 bytes) read from a pipe, written to a pipe: cat INPUT | PROGRAM | cat > /dev/null; median of \(rounds) rounds"
        let sample = linesSample()
        guard FileManager.default.isExecutableFile(atPath: sample) else {
            print("   (the lines sample is not built at \(sample): `swift build -c release --product lines` in the root package)")
            return ScenarioResult(name: "lines sample vs nl and cat -n", workload: workload, unit: "s", higherIsBetter: false,
                                  target: ("nl", 1.5), measurements: [])
        }
        let input = NSTemporaryDirectory() + "reactiveuv-lines-\(getpid()).txt"
        makeInput(at: input, bytes: bytes)
        defer { try? FileManager.default.removeItem(atPath: input) }
        let contenders: [(name: String, command: String)] = [
            (Contender.ours, "\"\(sample)\""),
            ("nl", "nl"),
            ("cat -n", "cat -n"),
        ]
        var wall: [String: [Double]] = [:]
        var cpu: [String: [Double]] = [:]
        for _ in 0..<rounds {
            for contender in contenders {
                guard let (seconds, cpuSeconds) = runPipeline("cat \"$0\" | \(contender.command) | cat > /dev/null", input: input) else {
                    print("   (\(contender.name) failed)")
                    continue
                }
                wall[contender.name, default: []].append(seconds)
                cpu[contender.name, default: []].append(cpuSeconds)
            }
        }
        let measurements = contenders.compactMap { contender -> Measurement? in
            guard let times = wall[contender.name], !times.isEmpty else { return nil }
            let cpuTimes = cpu[contender.name] ?? []
            let rate = Double(bytes) / median(times) / 1e6
            return Measurement(contender.name, median(times),
                               detail: "\(format(rate)) MB/s; runs \(format(times.min() ?? 0))-\(format(times.max() ?? 0)) s; pipeline CPU \(format(median(cpuTimes))) s")
        }
        return ScenarioResult(name: "lines sample vs nl and cat -n", workload: workload, unit: "s", higherIsBetter: false,
                              target: ("nl", 1.5), measurements: measurements)
    }

    /// The release `lines` executable: `LINES_SAMPLE`, else the root package's build.
    private static func linesSample() -> String {
        if let path = ProcessInfo.processInfo.environment["LINES_SAMPLE"] { return path }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/release/lines").path
    }

    /// Writes `bytes` of lines to a new file at `path`.
    private static func makeInput(at path: String, bytes: Int) {
        guard FileManager.default.createFile(atPath: path, contents: nil), let file = FileHandle(forWritingAtPath: path) else { return }
        defer { try? file.close() }
        var generator = UInt64(0x9E37_79B9_7F4A_7C15)
        var chunk: [UInt8] = []
        chunk.reserveCapacity(1 << 20)
        var written = 0
        while written < bytes {
            chunk.removeAll(keepingCapacity: true)
            while chunk.count < (1 << 20) - 128 {
                generator = generator &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let length = 20 + Int(generator >> 33) % 100
                for column in 0..<length - 1 { chunk.append(UInt8(ascii: "a") + UInt8((Int(generator >> 40) + column) % 26)) }
                chunk.append(UInt8(ascii: "\n"))
            }
            let take = min(chunk.count, bytes - written)
            file.write(Data(chunk[..<take]))
            written += take
        }
    }

    /// Runs `command` under `/bin/sh` with `input` as `$0`: wall-clock seconds and the CPU seconds of
    /// the whole pipeline, or nil when it failed.
    private static func runPipeline(_ command: String, input: String) -> (Double, Double)? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command, input]
        let before = childrenCPUSeconds()
        let start = nanoseconds()
        do { try process.run() } catch { return nil }
        process.waitUntilExit()
        let seconds = Double(nanoseconds() - start) / 1e9
        guard process.terminationStatus == 0 else { return nil }
        return (seconds, childrenCPUSeconds() - before)
    }

    /// User and system time of every child waited for so far.
    private static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return user + system
    }
}

// ReactiveUV benchmarks: our runtime side by side with raw libuv C, SwiftNIO,
// Dispatch, OpenCombine and Node, measured in one run, ratios printed.
//
//   Benchmarks/run                 every scenario at full size
//   Benchmarks/run --quick         small sizes (a smoke test)
//   Benchmarks/run --only timers   scenarios whose name contains "timers"
//   Benchmarks/run --markdown      also print a Markdown table for BENCHMARKS.md
//
// `--child MODE ...` runs one C baseline in this process and prints its figures (the scenarios
// start these children themselves): `--child rawc-stat PATH COUNT INFLIGHT [batch]`.
import Foundation

// First, before anything of ReactiveUV runs: a child must get libuv's pool as a C program does.
if CommandLine.arguments.dropFirst().first == "--child" {
    let mode = CommandLine.arguments.dropFirst(2).first ?? ""
    switch mode {
    case "rawc-stat": exit(FileSystemScenarios.rawCStatChild(Array(CommandLine.arguments.dropFirst(3))))
    default:
        FileHandle.standardError.write(Data("unknown child mode '\(mode)'; known: rawc-stat\n".utf8))
        exit(2)
    }
}

let arguments = CommandLine.arguments.dropFirst()
let quick = arguments.contains("--quick")
let wantsMarkdown = arguments.contains("--markdown")
let only: String? = arguments.firstIndex(of: "--only").flatMap { index in
    arguments.index(after: index) < arguments.endIndex ? arguments[arguments.index(after: index)] : nil
}
let scale: Int = arguments.firstIndex(of: "--scale").flatMap { index in
    arguments.index(after: index) < arguments.endIndex ? Int(arguments[arguments.index(after: index)]) : nil
} ?? (quick ? 10 : 1)

var scenarios: [(String, () -> [ScenarioResult])] = [
    ("cross-thread execute throughput", { [CrossThread.throughput(count: 1_000_000 / scale, rounds: quick ? 1 : 5)] }),
    ("cross-thread ping-pong latency", { [CrossThread.pingPong(count: 100_000 / scale)] }),
    ("1M timers, libuv shape", { Timers.millionTimers(count: 1_000_000 / scale, cyclic: false, includeNIO: true, rounds: quick ? 1 : 5) }),
    ("1M timers, cyclic", { Timers.millionTimers(count: 1_000_000 / scale, cyclic: true, includeNIO: true, rounds: quick ? 1 : 5) }),
    ("loop-thread run queue", { [LoopTick.runQueue(count: 10_000_000 / scale)] }),
    ("operator chain", { [OperatorScenarios.chain(count: 10_000_000 / scale)] }),
    ("subscribe + dispose", { [OperatorScenarios.subscribeDispose(count: 1_000_000 / scale)] }),
    ("task → loop → task hop", { [ConcurrencyScenarios.hop(count: 100_000 / scale)] }),
    ("actor calls", { [ConcurrencyScenarios.actors(count: 1_000_000 / scale)] }),
    ("TCP echo ping-pong (two CPUs)", { [IOScenarios.echo(warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 1, ours: { IOOurs.echo(size: 64, warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 1) },
                                                          oursAsync: { IOOurs.echo(size: 64, warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 1, async: true) })] }),
    ("TCP echo ping-pong (one CPU)", { [IOScenarios.echo(warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 0, ours: { IOOurs.echo(size: 64, warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 0) })] }),
    ("Unix-socket echo ping-pong (two CPUs)", { [IOScenarios.unixEcho(warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 1, ours: { IOOurs.unixEcho(path: $0, size: 64, warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 1) })] }),
    ("Unix-socket echo ping-pong (one CPU)", { [IOScenarios.unixEcho(warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 0, ours: { IOOurs.unixEcho(path: $0, size: 64, warmup: 200, measure: 5000 / scale, serverCPU: 0, clientCPU: 0) })] }),
    ("TCP pump", { [IOScenarios.pump(total: (4 << 30) / UInt64(scale), ours: { IOOurs.pump(total: (4 << 30) / UInt64(scale)) })] }),
    ("Unix-socket pump", { [IOScenarios.unixPump(total: (4 << 30) / UInt64(scale), ours: { IOOurs.unixPump(path: $0, total: (4 << 30) / UInt64(scale)) })] }),
    ("lines() over 80-byte lines", { [FramingScenarios.lines(megabytes: 1_024 / scale)] }),
    ("lines sample vs nl and cat -n", { [SampleScenarios.lines(bytes: (1 << 30) / scale, rounds: quick ? 1 : 3)] }),
    ("spawn rate", { [ProcessScenarios.spawnRate(count: 2000 / scale, rounds: quick ? 3 : 5)] }),
    ("file read, 1 GiB in 64 KiB chunks", { [FileScenarios.read(size: (1 << 30) / scale, rounds: quick ? 1 : 5)] }),
    ("stat throughput", { [FileSystemScenarios.stat(count: 1_000_000 / scale, rounds: quick ? 3 : 5)] }),
    ("directory listing", { [FileSystemScenarios.list(entries: 100_000 / scale, rounds: quick ? 4 : 6)] }),
    ("Scaling (one loop → two)", { [ScalingScenarios.scaling(warmup: quick ? 300 : 1000, measure: quick ? 700 : 3000)] }),
    ("Scaling, ours interleaved", { [ScalingScenarios.interleaved(rounds: quick ? 1 : 5, warmup: quick ? 300 : 1000, measure: quick ? 700 : 3000)] }),
    ("Group accept churn", { [ScalingScenarios.churn(warmup: quick ? 300 : 1000, measure: quick ? 700 : 3000)] }),
    ("Connection churn (server in its own process)", { ServerScenarios.churn(rounds: quick ? 1 : 5, warmup: quick ? 300 : 1000, measure: quick ? 700 : 3000) }),
    ("Idle connections", { [ServerScenarios.idle(count: 10_000 / scale, rounds: quick ? 1 : 3)] }),
    ("TLS bulk throughput", { [TLSScenarios.bulk(total: (1 << 30) / UInt64(scale), rounds: quick ? 1 : 3)] }),
    ("TLS handshakes per second", { [TLSScenarios.handshakes(count: 2000 / scale, rounds: quick ? 1 : 5)] }),
    ("Idle TLS connections memory", { [TLSScenarios.idle(count: 10_000 / scale, rounds: quick ? 1 : 2)] }),
    ("simulation speed", { [SimulationScenarios.speed(scale: scale)] }),
    ("file-watch latency", { [IOScenarios.fileWatch(count: 2000 / scale, ours: { IOOurs.fileWatch(directory: $0, file: $1, count: $2) })] }),
]

print("ReactiveUV benchmarks — \(ProcessInfo.processInfo.processorCount) cores, \(quick ? "quick" : "full") sizes")
print("")
var results: [ScenarioResult] = []
for (name, run) in scenarios where only.map({ name.contains($0) }) ?? true {
    for result in run() {
        printText(result)
        results.append(result)
    }
}
if wantsMarkdown { print(markdown(results)) }

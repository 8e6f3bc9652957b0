import Foundation
import MallocCounter

/// One contender's figure in one scenario.
struct Measurement {
    let contender: String
    let value: Double
    let detail: String
    let allocationsPerOperation: Double?

    init(_ contender: String, _ value: Double, detail: String = "", allocationsPerOperation: Double? = nil) {
        self.contender = contender
        self.value = value
        self.detail = detail
        self.allocationsPerOperation = allocationsPerOperation
    }
}

/// A scenario's results: ours first, then the anchors, all from the same run.
struct ScenarioResult {
    let name: String
    let workload: String
    let unit: String
    let higherIsBetter: Bool
    /// The target, as "ours ÷ anchor" bound for a named anchor, when the issues set one.
    let target: (anchor: String, bound: Double)?
    let measurements: [Measurement]
    /// The row of ours the target is judged on, when it is not the default one (the
    /// variant with the anchor's semantics, e.g. timers counted from the loop's time).
    var judged: String = Contender.ours
    /// Lines printed under the table (figures that are not a contender's, a verdict of its own).
    var notes: [String] = []

    var ours: Measurement? { measurements.first { $0.contender == Contender.ours } }

    /// ours ÷ anchor: above 1 is better when higher is better, below 1 is better otherwise.
    func ratio(to anchor: Measurement) -> Double? {
        guard let ours, anchor.value > 0 else { return nil }
        return ours.value / anchor.value
    }

    var targetVerdict: String? {
        guard let target, let anchor = measurements.first(where: { $0.contender == target.anchor }),
              let judgedRow = measurements.first(where: { $0.contender == judged }), anchor.value > 0 else { return nil }
        let ratio = judgedRow.value / anchor.value
        let met = higherIsBetter ? ratio >= target.bound : ratio <= target.bound
        let comparison = higherIsBetter ? "≥" : "≤"
        let name = judged == Contender.ours ? "ours" : judged
        return "target: \(name) ÷ \(target.anchor) \(comparison) \(format(target.bound))× — \(met ? "met" : "NOT met") (\(format(ratio))×)"
    }
}

enum Contender {
    static let ours = "ReactiveUV"
    /// Ours through its async/await bridge (not a contender the target is set for).
    static let oursAsync = "ours, async"
    /// Ours with a `bytes` subscription per connection (the servers' main row reads with one shared `StreamReader`).
    static let oursBytes = "ours, bytes"
    static let oursBare = "ReactiveUV bare"
    static let oursWithMetrics = "with metrics"
    static let oursLoopTime = "ReactiveUV loop time"
    static let rawC = "raw libuv C"
    static let rawCRefcounted = "raw C refcount"
    /// libuv + the system's OpenSSL between memory BIOs (the TLS scenarios' anchor).
    static let rawCTLS = "raw C + OpenSSL"
    static let nio = "SwiftNIO"
    static let dispatch = "Dispatch"
    static let node = "Node"
    static let openCombine = "OpenCombine"
    static let closures = "closure chain"
    static let condvar = "condvar floor"
    static let rawCSplitter = "C memchr"
    static let rawCSplitterOwned = "C memchr+copy"
}

func format(_ value: Double) -> String {
    if value >= 100 { return String(format: "%.0f", value) }
    if value >= 10 { return String(format: "%.1f", value) }
    return String(format: "%.2f", value)
}

func printText(_ result: ScenarioResult) {
    print("== \(result.name) ==")
    print("   \(result.workload)")
    print("   \(result.higherIsBetter ? "higher" : "lower") is better; ratio = ours ÷ contender")
    // At least one space after the longest contender's name.
    let width = max(16, (result.measurements.map(\.contender.count).max() ?? 0) + 1)
    let header = "   " + "contender".padding(toLength: width, withPad: " ", startingAt: 0)
        + "figure".padding(toLength: 22, withPad: " ", startingAt: 0)
        + "allocs/op".padding(toLength: 11, withPad: " ", startingAt: 0) + "ratio   detail"
    print(header)
    for measurement in result.measurements {
        let figure = "\(format(measurement.value)) \(result.unit)"
        let allocations = measurement.allocationsPerOperation.map { format($0) } ?? "–"
        let ratio = measurement.contender == Contender.ours ? "—" : (result.ratio(to: measurement).map { format($0) + "×" } ?? "–")
        print("   " + measurement.contender.padding(toLength: width, withPad: " ", startingAt: 0)
              + figure.padding(toLength: 22, withPad: " ", startingAt: 0)
              + allocations.padding(toLength: 11, withPad: " ", startingAt: 0)
              + ratio.padding(toLength: 8, withPad: " ", startingAt: 0) + measurement.detail)
    }
    if let verdict = result.targetVerdict { print("   \(verdict)") }
    for note in result.notes { print("   \(note)") }
    print("")
}

func markdown(_ results: [ScenarioResult]) -> String {
    var lines = ["| scenario | contender | figure | allocs/op | ours ÷ contender | detail |",
                 "| --- | --- | --- | --- | --- | --- |"]
    for result in results {
        for measurement in result.measurements {
            let ratio = measurement.contender == Contender.ours ? "—" : (result.ratio(to: measurement).map { format($0) + "×" } ?? "–")
            lines.append("| \(result.name) | \(measurement.contender) | \(format(measurement.value)) \(result.unit) | "
                         + "\(measurement.allocationsPerOperation.map { format($0) } ?? "–") | \(ratio) | \(measurement.detail) |")
        }
    }
    return lines.joined(separator: "\n")
}

/// Counts allocation calls made by every thread while `body` runs.
func countingAllocations<T>(_ body: () throws -> T) rethrows -> (T, UInt) {
    mc_start()
    let value = try body()
    return (value, mc_stop())
}

/// Nanoseconds on the monotonic clock.
func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// The median of repeated runs (each run returns one figure); runs the contenders interleaved by the caller.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

func percentile(_ sortedValues: [UInt64], _ fraction: Double) -> Double {
    guard !sortedValues.isEmpty else { return 0 }
    let index = min(sortedValues.count - 1, Int(Double(sortedValues.count) * fraction))
    return Double(sortedValues[index])
}

/// A resettable one-bit signal on a pthread mutex and condition variable: the same
/// waiting primitive the raw C baseline uses, so ping-pong compares only the hand-off.
final class CondFlag: @unchecked Sendable {
    // `flag` is protected by `mutex`.
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var flag = false

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    func signal() {
        pthread_mutex_lock(&mutex)
        flag = true
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    func wait() {
        pthread_mutex_lock(&mutex)
        while !flag { pthread_cond_wait(&condition, &mutex) }
        flag = false
        pthread_mutex_unlock(&mutex)
    }
}

/// Runs a Node script from Benchmarks/node and decodes the JSON object it prints.
func runNode(_ script: String, _ arguments: [String]) -> [String: Double]? {
    let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("node")
    return runJSON(executable: URL(fileURLWithPath: "/usr/bin/env"), ["node", directory.appendingPathComponent(script).path] + arguments)
}

/// Runs `executable` (its stderr passed through) and decodes the JSON object it prints: its numbers,
/// or nil when it could not start, exited nonzero or printed no object.
func runJSON(executable: URL, _ arguments: [String]) -> [String: Double]? {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { return nil }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
          let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
    return object.compactMapValues { ($0 as? NSNumber)?.doubleValue }
}

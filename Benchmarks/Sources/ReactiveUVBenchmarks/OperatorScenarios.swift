import Foundation
import ReactiveUV

enum OperatorScenarios {
    /// Runs `body` on a fresh loop's thread and waits for its result.
    static func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let loop = ReactiveUV.EventLoop(name: "operators")
        let done = CondFlag()
        let result = ResultBox<T>()
        loop.execute {
            result.value = body()
            done.signal()
        }
        done.wait()
        loop.shutdown()
        return result.value!
    }

    /// Scenario 4a: subject → map{x*3} → filter{even} → scan(0,+) → subscriber.
    static func chain(count: Int) -> ScenarioResult {
        let ours = onLoop { () -> ChainFigures in
            let subject = Subject<Int>()
            let total = Accumulator()
            let subscription = subject.map { $0 * 3 }.filter { $0 % 2 == 0 }.scan(0) { $0 &+ $1 }.subscribeNext { total.value = $0 }
            let begin = nanoseconds()
            let (_, allocations) = countingAllocations { () -> Void in
                for value in 0..<count { subject.sendNext(value) }
            }
            let elapsed = Double(nanoseconds() - begin) / 1e9
            subscription.dispose()
            return ChainFigures(rate: Double(count) / elapsed, allocations: Double(allocations) / Double(count), checksum: total.value)
        }
        let combine = OperatorAnchors.openCombineChain(count: count)
        let closures = OperatorAnchors.closureChain(count: count)
        let checks = ours.checksum == combine.checksum && ours.checksum == closures.checksum ? "checksums agree" : "CHECKSUMS DIFFER"
        return ScenarioResult(
            name: "operator chain",
            workload: "subject → map{x*3} → filter{even} → scan(0,+) → subscriber, \(count) sends on one thread (ours on a loop thread)",
            unit: "M values/s", higherIsBetter: true, target: (Contender.openCombine, 10),
            measurements: [
                Measurement(Contender.ours, ours.rate / 1e6, detail: "Subject, fused operators; \(checks)", allocationsPerOperation: ours.allocations),
                Measurement(Contender.openCombine, combine.valuesPerSecond / 1e6, detail: "PassthroughSubject", allocationsPerOperation: combine.allocationsPerValue),
                Measurement(Contender.closures, closures.valuesPerSecond / 1e6, detail: "the limit: four closures calling each other"),
            ])
    }

    /// Scenario 4b: subscribe a subscriber to a subject, then dispose it.
    static func subscribeDispose(count: Int) -> ScenarioResult {
        let ours = onLoop { () -> (Double, Double) in
            let subject = Subject<Int>()
            let begin = nanoseconds()
            let (_, allocations) = countingAllocations { () -> Void in
                for _ in 0..<count { subject.subscribeNext { _ in }.dispose() }
            }
            return (Double(nanoseconds() - begin) / 1e3 / Double(count), Double(allocations) / Double(count))
        }
        let combine = OperatorAnchors.openCombineSubscribeCancel(count: count)
        return ScenarioResult(
            name: "subscribe + dispose",
            workload: "\(count) × (subscribe a subscriber to a subject; dispose it), on one thread (ours on a loop thread)",
            unit: "µs/cycle", higherIsBetter: false, target: (Contender.openCombine, 0.2),
            measurements: [
                Measurement(Contender.ours, ours.0, detail: "Subject.subscribeNext + dispose", allocationsPerOperation: ours.1),
                Measurement(Contender.openCombine, combine.microsecondsPerCycle, detail: "PassthroughSubject.sink + cancel",
                            allocationsPerOperation: combine.allocationsPerCycle),
            ])
    }
}

struct ChainFigures: Sendable {
    let rate: Double
    let allocations: Double
    let checksum: Int
}

/// The last value a benchmark sink saw (loop thread only).
final class Accumulator: @unchecked Sendable {
    // Written on the loop thread and read there after the run.
    var value = 0
}

/// Hands a result from the loop thread to the waiting thread (after `CondFlag`).
final class ResultBox<T>: @unchecked Sendable {
    // Written before the flag is signalled, read after it was waited for.
    var value: T?
}

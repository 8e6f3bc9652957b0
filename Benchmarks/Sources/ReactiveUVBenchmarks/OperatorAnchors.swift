import Foundation
import OpenCombine

/// The operator-chain workload: source → map{x*3} → filter{even} → scan(0,+) → sink.
enum OperatorAnchors {
    /// OpenCombine: PassthroughSubject → map → filter → scan → sink.
    static func openCombineChain(count: Int) -> (valuesPerSecond: Double, allocationsPerValue: Double, checksum: Int) {
        let subject = PassthroughSubject<Int, Never>()
        var total = 0
        let cancellable = subject.map { $0 * 3 }.filter { $0 % 2 == 0 }.scan(0, +).sink { total = $0 }
        let begin = nanoseconds()
        let (_, counted) = countingAllocations { () -> Void in
            for value in 0..<count { subject.send(value) }
        }
        let elapsed = Double(nanoseconds() - begin) / 1e9
        cancellable.cancel()
        return (Double(count) / elapsed, Double(counted) / Double(count), total)
    }

    /// The limit: the same four steps as closures calling closures.
    static func closureChain(count: Int) -> (valuesPerSecond: Double, checksum: Int) {
        var total = 0
        var accumulator = 0
        let sink: (Int) -> Void = { total = $0 }
        let scan: (Int) -> Void = { accumulator += $0; sink(accumulator) }
        let filter: (Int) -> Void = { if $0 % 2 == 0 { scan($0) } }
        let map: (Int) -> Void = { filter($0 * 3) }
        let send = opaque(map)
        let begin = nanoseconds()
        for value in 0..<count { send(value) }
        let elapsed = Double(nanoseconds() - begin) / 1e9
        return (Double(count) / elapsed, total)
    }

    /// OpenCombine: subscribe a sink to a subject, then cancel it.
    static func openCombineSubscribeCancel(count: Int) -> (microsecondsPerCycle: Double, allocationsPerCycle: Double) {
        let subject = PassthroughSubject<Int, Never>()
        let begin = nanoseconds()
        let (_, allocations) = countingAllocations { () -> Void in
            for _ in 0..<count {
                let cancellable = subject.sink { _ in }
                cancellable.cancel()
            }
        }
        let elapsed = Double(nanoseconds() - begin) / 1e3
        return (elapsed / Double(count), Double(allocations) / Double(count))
    }
}

/// Hides a closure from the optimizer so the chain is really called through closures.
@inline(never)
func opaque<T>(_ value: T) -> T { value }

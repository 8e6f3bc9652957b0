import CBaselines
import Foundation
import ReactiveUV

/// `lines()` against a hand-written C memchr splitter over the same chunks (issue 16's framing target),
/// and against the same splitter handing out an owned copy of each line, as `lines()` does.
enum FramingScenarios {
    static let lineLength = 80
    static let chunkSize = 65_536

    /// The chunks a stream of 80-byte lines (79 bytes, then LF) is read in: chunk i starts at
    /// byte 65,536 × i, so at offset (16 × i) % 80 of a line; five chunks cover every phase.
    static func chunks() -> [[UInt8]] {
        let phases = lineLength / gcd(chunkSize, lineLength)
        return (0..<phases).map { phase in
            let start = phase * chunkSize
            return (start..<(start + chunkSize)).map { position in
                let column = position % lineLength
                return column == lineLength - 1 ? UInt8(ascii: "\n") : UInt8(ascii: "a") + UInt8((position / lineLength + column) % 26)
            }
        }
    }

    /// `megabytes` MiB of 80-byte lines through a subject, `lines()` and a counting subscriber, on a loop thread.
    static func lines(megabytes: Int) -> ScenarioResult {
        let chunks = chunks()
        let chunkCount = max(1, megabytes * (1 << 20) / chunkSize)
        let totalBytes = chunkCount * chunkSize
        let bytesBox = UncheckedChunks(chunks)

        let ours = OperatorScenarios.onLoop { () -> LineFigures in
            run(chunks: bytesBox.value, count: chunkCount) { bytes, tally in
                bytes.lines().subscribeNext { line in
                    tally.lines += 1
                    tally.bytes += line.count
                }
            }
        }
        let kept = OperatorScenarios.onLoop { () -> LineFigures in
            run(chunks: bytesBox.value, count: chunkCount) { bytes, tally in
                bytes.lines().subscribeNext { line in
                    tally.lines += 1
                    tally.bytes += line.count
                    tally.kept = line  // held until the next line: its storage cannot be reused
                }
            }
        }
        let strings = OperatorScenarios.onLoop { () -> LineFigures in
            run(chunks: bytesBox.value, count: chunkCount) { bytes, tally in
                bytes.utf8Lines().subscribeNext { line in
                    tally.lines += 1
                    tally.bytes += line.utf8.count
                }
            }
        }
        let c = cBaseline(chunks: chunks, count: chunkCount, ownedCopies: false)
        let cOwned = cBaseline(chunks: chunks, count: chunkCount, ownedCopies: true)
        let oursRate = Double(totalBytes) / ours.seconds / 1e9
        let keptRate = Double(totalBytes) / kept.seconds / 1e9
        let cOwnedRate = Double(totalBytes) / cOwned.seconds / 1e9
        let stringsRate = Double(totalBytes) / strings.seconds / 1e9
        let cRate = Double(totalBytes) / c.seconds / 1e9
        let agree = ours.lines == c.lines && ours.lineBytes == c.lineBytes && strings.lines == c.lines
            && kept.lines == c.lines && kept.lineBytes == c.lineBytes && cOwned.lines == c.lines && cOwned.lineBytes == c.lineBytes
        let checks = agree ? "line and byte counts agree" : "COUNTS DIFFER (ours \(ours.lines)/\(ours.lineBytes), C \(c.lines)/\(c.lineBytes))"
        return ScenarioResult(
            name: "lines() over 80-byte lines",
            workload: "\(totalBytes >> 20) MiB in \(chunkCount) chunks of 64 KiB, \(c.lines) lines; subject → lines() → count (ours on a loop thread)",
            unit: "GB/s", higherIsBetter: true, target: (Contender.rawCSplitter, 0.5),
            measurements: [
                Measurement(Contender.ours, oursRate, detail: "[UInt8] lines, each let go by the subscriber; \(checks)",
                            allocationsPerOperation: ours.allocationsPerLine),
                Measurement("lines() kept", keptRate, detail: "the subscriber holds each line until the next",
                            allocationsPerOperation: kept.allocationsPerLine),
                Measurement("utf8Lines()", stringsRate, detail: "String lines", allocationsPerOperation: strings.allocationsPerLine),
                Measurement(Contender.rawCSplitter, cRate, detail: "memchr, lines counted, nothing copied", allocationsPerOperation: 0),
                Measurement(Contender.rawCSplitterOwned, cOwnedRate, detail: "memchr, each line an owned copy: malloc, memcpy, free",
                            allocationsPerOperation: cOwned.allocationsPerLine),
            ])
    }

    /// Sends the chunks into a subject that `subscribe` splits and counts into the tally.
    private static func run(chunks: [[UInt8]], count: Int,
                            _ subscribe: (Signal<[UInt8]>, LineTally) -> any Disposable) -> LineFigures {
        let subject = Subject<[UInt8]>()
        let tally = LineTally()
        let subscription = subscribe(subject, tally)
        let begin = nanoseconds()
        let (_, allocations) = countingAllocations { () -> Void in
            for index in 0..<count { subject.sendNext(chunks[index % chunks.count]) }
            subject.sendCompleted()
        }
        let seconds = Double(nanoseconds() - begin) / 1e9
        subscription.dispose()
        return LineFigures(seconds: seconds, lines: tally.lines, lineBytes: tally.bytes,
                           allocationsPerLine: Double(allocations) / Double(max(1, tally.lines)))
    }

    private static func cBaseline(chunks: [[UInt8]], count: Int, ownedCopies: Bool) -> LineFigures {
        var lines: UInt64 = 0, bytes: UInt64 = 0
        let contiguous = chunks.flatMap { $0 }
        let (elapsed, allocations) = countingAllocations {
            contiguous.withUnsafeBufferPointer { all in
                ownedCopies
                    ? rawc_split_lines_owned(all.baseAddress, Int32(chunks.count), chunkSize, Int64(count), &lines, &bytes)
                    : rawc_split_lines(all.baseAddress, Int32(chunks.count), chunkSize, Int64(count), &lines, &bytes)
            }
        }
        return LineFigures(seconds: Double(elapsed) / 1e9, lines: Int(lines), lineBytes: Int(bytes),
                           allocationsPerLine: Double(allocations) / Double(max(1, lines)))
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
}

struct LineFigures: Sendable {
    let seconds: Double
    let lines: Int
    let lineBytes: Int
    let allocationsPerLine: Double
}

/// Lines and bytes a benchmark subscriber counted (loop thread only).
final class LineTally: @unchecked Sendable {
    // Written on the loop thread and read there after the run.
    var lines = 0
    var bytes = 0
    var kept: [UInt8] = []
}

/// The pre-built chunks, handed to the loop thread (read only there while the run lasts).
struct UncheckedChunks: @unchecked Sendable {
    // Immutable arrays: read by one thread at a time.
    let value: [[UInt8]]
    init(_ value: [[UInt8]]) { self.value = value }
}

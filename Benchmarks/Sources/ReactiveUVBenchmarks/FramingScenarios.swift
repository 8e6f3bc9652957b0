import CBaselines
import Foundation
import ReactiveUV

/// `lines()` against a hand-written C memchr splitter over the same chunks (the framing target),
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
    ///
    /// The five contenders run one after the other in each of `rounds` rounds, and each row is
    /// the median of its rounds (the range in its detail): on a shared machine one run of a
    /// 20 ms C loop can land in another engineer's build.
    static func lines(megabytes: Int, rounds: Int = 5) -> ScenarioResult {
        let chunks = chunks()
        let chunkCount = max(1, megabytes * (1 << 20) / chunkSize)
        let totalBytes = chunkCount * chunkSize
        let bytesBox = UncheckedChunks(chunks)

        var figures: [String: [LineFigures]] = [:]
        for _ in 0..<rounds {
            figures[Contender.ours, default: []].append(OperatorScenarios.onLoop { () -> LineFigures in
                run(chunks: bytesBox.value, count: chunkCount) { bytes, tally in
                    bytes.lines().subscribeNext { line in
                        tally.lines += 1
                        tally.bytes += line.count
                    }
                }
            })
            figures[keptRow, default: []].append(OperatorScenarios.onLoop { () -> LineFigures in
                run(chunks: bytesBox.value, count: chunkCount) { bytes, tally in
                    bytes.lines().subscribeNext { line in
                        tally.lines += 1
                        tally.bytes += line.count
                        tally.kept = line  // held until the next line: its storage cannot be reused
                    }
                }
            })
            figures[stringsRow, default: []].append(OperatorScenarios.onLoop { () -> LineFigures in
                run(chunks: bytesBox.value, count: chunkCount) { bytes, tally in
                    bytes.utf8Lines().subscribeNext { line in
                        tally.lines += 1
                        tally.bytes += line.utf8.count
                    }
                }
            })
            figures[Contender.rawCSplitter, default: []].append(cBaseline(chunks: chunks, count: chunkCount, ownedCopies: false))
            figures[Contender.rawCSplitterOwned, default: []].append(cBaseline(chunks: chunks, count: chunkCount, ownedCopies: true))
        }
        let reference = figures[Contender.rawCSplitter]![0]
        let disagreeing = figures.filter { $0.value.contains { $0.lines != reference.lines || $0.lineBytes != reference.lineBytes } }.keys
        let checks = disagreeing.isEmpty ? "line and byte counts agree" : "COUNTS DIFFER (\(disagreeing.sorted().joined(separator: ", ")))"
        func row(_ contender: String, _ detail: String) -> Measurement {
            let rates = figures[contender]!.map { Double(totalBytes) / $0.seconds / 1e9 }
            return Measurement(contender, median(rates), detail: "\(detail) (runs \(format(rates.min()!))–\(format(rates.max()!)))",
                               allocationsPerOperation: figures[contender]![0].allocationsPerLine)
        }
        return ScenarioResult(
            name: "lines() over 80-byte lines",
            workload: "\(totalBytes >> 20) MiB in \(chunkCount) chunks of 64 KiB, \(reference.lines) lines; subject → lines() → count "
                + "(ours on a loop thread); median of \(rounds) rounds",
            unit: "GB/s", higherIsBetter: true, target: (Contender.rawCSplitter, 0.5),
            measurements: [
                row(Contender.ours, "[UInt8] lines, each let go by the subscriber; \(checks)"),
                row(keptRow, "the subscriber holds each line until the next"),
                row(stringsRow, "String lines"),
                row(Contender.rawCSplitter, "memchr, lines counted, nothing copied"),
                row(Contender.rawCSplitterOwned, "memchr, each line an owned copy: malloc, memcpy, free"),
            ])
    }

    private static let keptRow = "lines() kept"
    private static let stringsRow = "utf8Lines()"

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

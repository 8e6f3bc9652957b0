import CBaselines
import Foundation
import ReactiveUV

enum FileScenarios {
    /// Reading a file of `size` bytes in 64 KiB chunks, start (open) to end (close), with the
    /// page cache warm (the file is read once first): ours (`OpenFile.chunks`, the recommended
    /// way, and `Files.chunks`), raw C (`uv_fs_read` one request at a time) and Node
    /// (`fs.createReadStream`, highWaterMark 64 KiB). The contenders run interleaved, `rounds`
    /// times each, and each reports its median round.
    static func read(size: Int, rounds: Int) -> ScenarioResult {
        let chunk = 65_536
        let directory = NSTemporaryDirectory() + "reactiveuv-bench-read-\(getpid())"
        let path = directory + "/file.bin"
        let filesChunks = "Files.chunks"
        var times: [String: [Double]] = [:]
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try makeFile(path, size: size)
        } catch {
            print("file read: cannot make the file: \(error)")
            return ScenarioResult(name: "file read", workload: "", unit: "MB/s", higherIsBetter: true, target: nil, measurements: [])
        }
        _ = readOnce(path)  // the page cache is warm for every contender
        for _ in 0..<rounds {
            var bytes: UInt64 = 0
            let rawC = rawc_file_read(path, Int32(chunk), &bytes)
            let node = runNode("file_read.js", [path, String(chunk)])
            let rows: [(String, UInt64?)] = [
                (Contender.ours, ours(path: path, chunk: chunk, size: size, openFile: true)),
                (filesChunks, ours(path: path, chunk: chunk, size: size, openFile: false)),
                (Contender.rawC, bytes == UInt64(size) ? rawC : nil),
                (Contender.node, node.flatMap { $0["failed"] == 0 && $0["bytes"] == Double(size) ? $0["elapsed_ns"].map { UInt64($0) } : nil }),
            ]
            for (name, elapsed) in rows {
                if let elapsed, elapsed > 0 { times[name, default: []].append(Double(elapsed)) }
            }
        }
        var measurements: [Measurement] = []
        for (name, detail) in [(Contender.ours, "Files.open + OpenFile.chunks"), (filesChunks, "Files.chunks(path)"),
                               (Contender.rawC, "uv_fs_read, one request at a time"),
                               (Contender.node, "fs.createReadStream")] {
            guard let elapsed = times[name].map(median), elapsed > 0 else { continue }
            measurements.append(Measurement(name, Double(size) / 1e6 / (elapsed / 1e9),
                                            detail: "\(format(elapsed / 1e6)) ms (median of \(times[name]?.count ?? 0)); \(detail)"))
        }
        return ScenarioResult(
            name: "file read",
            workload: "read a \(size >> 20) MiB file in 64 KiB chunks, open to close, page cache warm; \(rounds) interleaved rounds",
            unit: "MB/s", higherIsBetter: true, target: (Contender.rawC, 0.9), measurements: measurements)
    }

    /// Ours: open, then chunks to the end (counting bytes) on the loop thread; nanoseconds from open to close.
    static func ours(path: String, chunk: Int, size: Int, openFile: Bool) -> UInt64? {
        let loop = ReactiveUV.EventLoop(name: "file read")
        defer { loop.shutdown() }
        let finished = CondFlag()
        let elapsed = ResultBox<UInt64>()
        loop.execute {
            let begin = nanoseconds()
            let total = ByteCount()
            let end: @Sendable (Bool) -> Void = { ok in
                elapsed.value = ok && total.value == size ? nanoseconds() - begin : nil
                finished.signal()
            }
            if openFile {
                let owner = SerialDisposable()
                owner.inner = Files.open(path).subscribe(next: { file in
                    _ = file.chunks(chunkSize: chunk).subscribe(next: { total.value += $0.count }, error: { _ in
                        owner.dispose()
                        end(false)
                    }, completed: {
                        _ = file.close().subscribe(error: { _ in end(false) }, completed: { end(true) })
                    })
                }, error: { _ in end(false) })
            } else {
                _ = Files.chunks(path, chunkSize: chunk).subscribe(next: { total.value += $0.count }, error: { _ in end(false) },
                                                                  completed: { end(true) })
            }
        }
        finished.wait()
        return elapsed.value
    }

    private static func makeFile(_ path: String, size: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw CocoaError(.fileWriteUnknown)
        }
        defer { try? handle.close() }
        let block = Data((0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        var written = 0
        while written < size {
            let part = block.prefix(size - written)
            try handle.write(contentsOf: part)
            written += part.count
        }
    }

    /// Reads the file once with plain `read(2)` (to warm the page cache); returns the bytes read.
    private static func readOnce(_ path: String) -> Int {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var total = 0
        while true {
            let got = Foundation.read(descriptor, buffer, 1 << 20)
            if got <= 0 { return total }
            total += got
        }
    }
}

/// Bytes counted on one loop thread.
final class ByteCount: @unchecked Sendable {
    // Touched only on the loop thread that reads the file.
    var value = 0
}

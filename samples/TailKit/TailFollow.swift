// The `tail` sample's logic: the last lines of a file and `tail -F`'s following, written to an output
// the caller gives (standard output in the sample, a collector in the tests, which run it on a
// simulated loop).
import ReactiveUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why the sample stops early: standard output failed (the reader went away, or a real error).
///
/// Thread rule: a value; safe from any thread.
public struct OutputFailed: Error {
    /// The output's error.
    public let underlying: any Error
}

/// Copies files to the output (standard output in the sample), awaiting each write (a slow reader holds
/// the copy back), and counts the bytes it read.
///
/// Thread rule: the loop's task only, like the whole sample.
public final class Copier {
    /// Writes bytes to the output; the signal ends when they were written (or with the output's error).
    public let write: ([UInt8]) -> Signal<Void>
    /// Bytes read from files so far (`--stats`).
    public var bytesRead = 0

    /// A copier writing with `write`. Thread rule: the loop's task.
    public init(write: @escaping ([UInt8]) -> Signal<Void>) { self.write = write }

    /// Writes `file` from `offset` to its current end; returns the offset after the last byte.
    /// Thread rule: the loop's task.
    public func copyToEnd(of file: OpenFile, from offset: Int) async throws -> Int {
        var position = offset
        for try await chunk in file.chunks(from: offset).values {
            position += chunk.count
            bytesRead += chunk.count
            if let error = await write(chunk).waitUntilCompleted() { throw OutputFailed(underlying: error) }
        }
        return position
    }

    /// Where the last `count` lines of the file's first `size` bytes begin: read backwards one window
    /// at a time from the end, each byte once, until enough line ends were seen (a final LF ends the
    /// last line). Windows grow from 64 KiB to 8 MiB, so a file with few line ends is scanned in few
    /// reads while memory stays bounded (and no read passes `OpenFile.maxReadCount`). Thread rule: the loop's task.
    public func startOfLastLines(_ count: Int, of file: OpenFile, size: Int) async throws -> Int {
        if count == 0 || size == 0 { return size }
        var window = 64 << 10
        var end = size
        var seen = 0
        var atFileEnd = true
        while end > 0 {
            let start = max(0, end - window)
            let bytes = try await file.read(at: start, count: end - start).first() ?? []
            bytesRead += bytes.count
            var length = bytes.count
            if atFileEnd && length > 0 && bytes[length - 1] == UInt8(ascii: "\n") { length -= 1 }
            atFileEnd = false
            let lineEnds = Copier.lineEnds(in: bytes, length: length)
            let needed = count - seen
            if lineEnds.count >= needed { return start + lineEnds[lineEnds.count - needed] + 1 }
            seen += lineEnds.count
            end = start
            window = min(window * 2, 8 << 20)
        }
        return 0
    }

    /// Writes the last `count` lines of a source read as a stream (a FIFO, a pipe such as `/dev/stdin`, a
    /// device, a `/proc` file whose size says 0): positional reads fail on the first (`ESPIPE`), and a
    /// size of 0 says nothing of the last. Only the last lines read so far are kept, trimmed as they grow.
    /// Thread rule: the loop's task.
    public func copyLastLines(_ count: Int, ofStream path: String, on loop: EventLoop) async throws {
        var kept: [UInt8] = []
        var keptAfterTrim = 0
        for try await chunk in Files.chunks(path, on: loop).values {
            bytesRead += chunk.count
            kept.append(contentsOf: chunk)
            // Trimmed when it doubled: each byte is scanned a bounded number of times.
            if kept.count >= max(64 << 10, 2 * keptAfterTrim) {
                kept.removeFirst(Copier.startOfLastLines(count, in: kept))
                keptAfterTrim = kept.count
            }
        }
        kept.removeFirst(Copier.startOfLastLines(count, in: kept))
        if !kept.isEmpty, let error = await write(kept).waitUntilCompleted() { throw OutputFailed(underlying: error) }
    }

    /// Where the last `count` lines of `bytes` begin (a final LF ends the last line).
    static func startOfLastLines(_ count: Int, in bytes: [UInt8]) -> Int {
        if count == 0 { return bytes.count }
        var length = bytes.count
        if length > 0 && bytes[length - 1] == UInt8(ascii: "\n") { length -= 1 }
        let ends = lineEnds(in: bytes, length: length)
        return ends.count >= count ? ends[ends.count - count] + 1 : 0
    }

    /// The offsets of the LFs among the first `length` bytes, found with memchr: a file with few line
    /// ends is scanned at memory speed, not a byte per loop turn.
    static func lineEnds(in bytes: [UInt8], length: Int) -> [Int] {
        var ends: [Int] = []
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < length, let hit = memchr(base + offset, Int32(UInt8(ascii: "\n")), length - offset) {
                offset = UnsafeRawPointer(hit) - base + 1
                ends.append(offset - 1)
            }
        }
        return ends
    }
}

/// Whether `error` is `ENOENT` (the name names nothing). Thread rule: safe from any thread.
public func isMissing(_ error: any Error) -> Bool {
    (error as? UVError)?.name == "ENOENT"
}

/// Whether `error` is `EACCES` or `EPERM` (FILE may not be read). Thread rule: safe from any thread.
public func isDenied(_ error: any Error) -> Bool {
    guard let name = (error as? UVError)?.name else { return false }
    return name == "EACCES" || name == "EPERM"
}

/// Says what happens to FILE's name, in GNU tail's words, from the follower's notices.
///
/// Thread rule: the loop's task.
struct NoticeWriter {
    /// What was said last: the words for a file followed again depend on it.
    enum Said { case nothing, following, missing, denied, untailable }

    let path: String
    let interval: Duration
    /// Where the words go (standard error in the sample).
    let printError: (String) -> Void
    var said = Said.nothing

    mutating func say(_ notice: FileFollow.Notice) {
        switch notice {
        case .following:
            switch said {
            case .nothing: break
            case .following: printError("tail: '\(path)' has been replaced;  following new file")
            case .missing: printError("tail: '\(path)' has appeared;  following new file")
            case .denied, .untailable: printError("tail: '\(path)' has become accessible")
            }
            said = .following
        case .missing:
            if said == .nothing {
                printError("tail: cannot open '\(path)' for reading: No such file or directory")
            } else {
                printError("tail: '\(path)' has become inaccessible: No such file or directory")
            }
            said = .missing
        case .denied:
            printError("tail: cannot open '\(path)' for reading: Permission denied")
            said = .denied
        case .notAFile:
            printError("tail: '\(path)' has been replaced with an untailable file")
            said = .untailable
        case .truncated:
            printError("tail: \(path): file truncated")
        case .unwatchable(let directory, let error):
            printError("tail: cannot watch '\(directory)' (\(error)); looking for changes every \(interval) instead")
        }
    }
}

/// `tail -F`: the last `lines` lines of `path`, then every append, following the name
/// (`FileWatch.followEvents`), looking at it every `interval` too. Returns when `stop` sends (Ctrl-C in
/// the sample); what happens to the name is said, in GNU tail's words, to `say`.
///
/// Thread rule: call from a task on `loop`.
public func follow(_ path: String, lines: Int, interval: Duration, _ copier: Copier, on loop: EventLoop,
                   until stop: Signal<Void>, say printError: @escaping (String) -> Void) async throws {
    var notices = NoticeWriter(path: path, interval: interval, printError: printError)
    // Where the last lines begin now; a file missing or unreadable now is read from its start once it can be.
    var start = FileFollow.Start.beginning
    do {
        let found: (FileInfo, Int) = try await FileSystem.withOpenFile(path, on: loop) { file in
            let info = try await file.stat().first()!
            guard info.type == .regular else { return (info, 0) }
            return (info, try await copier.startOfLastLines(lines, of: file, size: Int(info.size)))
        }
        if found.0.type == .directory {
            // Refused by the follower (EISDIR) until a file takes the name, as GNU tail -F waits.
            printError("tail: error reading '\(path)': Is a directory")
            printError("tail: \(path): cannot follow end of this type of file")
            notices.said = .untailable
        } else {
            start = .offset(found.1)
        }
    } catch where isMissing(error) || isDenied(error) {
        // Said by the follower's first notice.
    }
    let events = FileWatch.followEvents(at: path, from: start, interval: interval, on: loop)
        .retry(upTo: Int.max, delay: interval, while: { ($0 as? UVError)?.name == "EISDIR" })
        .take(until: stop)
    for try await event in events.values(bufferingPolicy: .bounded(16)) {
        switch event {
        case .bytes(let chunk):
            copier.bytesRead += chunk.count
            if let error = await copier.write(chunk).waitUntilCompleted() { throw OutputFailed(underlying: error) }
        case .notice(let notice):
            notices.say(notice)
        }
    }
}


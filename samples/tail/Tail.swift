// tail: prints the last lines of a file and, with -F, what is appended to it, following its name
// as GNU `tail -F` does.
//
//   tail [-n N] [-F] [--interval DURATION] [--stats] FILE
//
// With -F the sample finds where the last lines begin, then prints what `FileWatch.followEvents`
// sends from there: the appended bytes, across rotation, truncation, delete + re-create and a
// directory removed and made again (the library's rules), and its notices in GNU tail's words.
// A directory named at the start is said and waited for, as GNU tail -F does.
// Without -F, FILE may also be a pipe (`/dev/stdin`), a FIFO, a device or a `/proc` file: one whose
// size does not say where its end is is read through once, keeping only its last lines.
import ReactiveUV
import SampleSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: tail [-n N] [-F] [--interval DURATION] [--stats] FILE
      prints the last N lines of FILE (default 10)
      -F                  then keep printing what is appended, following FILE by name across
                          rotation, truncation and delete + re-create (Ctrl-C stops, status 0)
      --interval DURATION with -F, also look at FILE this often (default 1s), for changes the
                          directory watch cannot see (a rename into another directory, NFS, a
                          directory it may not read)
      --stats             at exit, print how many bytes were read from files, to standard error
    """

struct Options {
    var lines = 10
    var follow = false
    var interval: Duration = .seconds(1)
    var stats = false
    var path = ""

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var path: String?
        var reader = ArgumentReader(arguments)
        while let argument = try reader.next() {
            switch argument {
            case "-n", "--lines":
                let text = try reader.value(for: argument)
                guard let count = Int(text), count >= 0 else { throw UsageError("\(argument) needs a count of 0 or more, got '\(text)'") }
                options.lines = count
            case "-F", "--follow":
                options.follow = true
            case "--interval":
                options.interval = try parseDuration(try reader.value(for: argument))
                guard options.interval > .zero else { throw UsageError("--interval must be positive") }
            case "--stats":
                options.stats = true
            default:
                guard !argument.hasPrefix("-") || argument == "-" else { throw UsageError("unknown argument '\(argument)'") }
                guard path == nil else { throw UsageError("one FILE only, got '\(path!)' and '\(argument)'") }
                path = argument
            }
        }
        guard let path else { throw UsageError("FILE is required") }
        options.path = path
        return options
    }
}

/// Why the sample stops early: standard output failed (the reader went away, or a real error).
struct OutputFailed: Error {
    let underlying: any Error
}

/// Copies files to standard output, awaiting each write (a slow reader holds the copy back), and
/// counts the bytes it read.
final class Copier {
    let output: StandardWriter
    /// Bytes read from files so far (`--stats`). Loop thread only, like the whole sample.
    var bytesRead = 0

    init(output: StandardWriter) { self.output = output }

    /// Writes `file` from `offset` to its current end; returns the offset after the last byte.
    func copyToEnd(of file: OpenFile, from offset: Int) async throws -> Int {
        var position = offset
        for try await chunk in file.chunks(from: offset).values {
            position += chunk.count
            bytesRead += chunk.count
            if let error = await output.write(chunk).waitUntilCompleted() { throw OutputFailed(underlying: error) }
        }
        return position
    }

    /// Where the last `count` lines of the file's first `size` bytes begin: read backwards one window
    /// at a time from the end, each byte once, until enough line ends were seen (a final LF ends the
    /// last line). Windows grow from 64 KiB to 8 MiB, so a file with few line ends is scanned in few
    /// reads while memory stays bounded (and no read passes `OpenFile.maxReadCount`).
    func startOfLastLines(_ count: Int, of file: OpenFile, size: Int) async throws -> Int {
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
    func copyLastLines(_ count: Int, ofStream path: String, on loop: EventLoop) async throws {
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
        if !kept.isEmpty, let error = await output.write(kept).waitUntilCompleted() { throw OutputFailed(underlying: error) }
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

/// Whether `error` is `ENOENT` (the name names nothing).
func isMissing(_ error: any Error) -> Bool {
    (error as? UVError)?.name == "ENOENT"
}

/// Whether `error` is `EACCES` or `EPERM` (FILE may not be read).
func isDenied(_ error: any Error) -> Bool {
    guard let name = (error as? UVError)?.name else { return false }
    return name == "EACCES" || name == "EPERM"
}

/// Says what happens to FILE's name, in GNU tail's words, from the follower's notices.
struct NoticeWriter {
    /// What was said last: the words for a file followed again depend on it.
    enum Said { case nothing, following, missing, denied, untailable }

    let path: String
    let interval: Duration
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

/// `tail -F`: the last lines, then every append, following the name (`FileWatch.followEvents`). Returns at
/// Ctrl-C.
func follow(_ options: Options, _ copier: Copier, on loop: EventLoop) async throws {
    let path = options.path
    var notices = NoticeWriter(path: path, interval: options.interval)
    // Where the last lines begin now; a file missing or unreadable now is read from its start once it can be.
    var start = FileFollow.Start.beginning
    do {
        let found: (FileInfo, Int) = try await FileSystem.withOpenFile(path, on: loop) { file in
            let info = try await file.stat().first()!
            guard info.type == .regular else { return (info, 0) }
            return (info, try await copier.startOfLastLines(options.lines, of: file, size: Int(info.size)))
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
    let events = FileWatch.followEvents(at: path, from: start, interval: options.interval, on: loop)
        .retry(upTo: Int.max, delay: options.interval, while: { ($0 as? UVError)?.name == "EISDIR" })
        .take(until: interruptions(on: loop).map { _ in () })
    for try await event in events.values(bufferingPolicy: .bounded(16)) {
        switch event {
        case .bytes(let chunk):
            copier.bytesRead += chunk.count
            if let error = await copier.output.write(chunk).waitUntilCompleted() { throw OutputFailed(underlying: error) }
        case .notice(let notice):
            notices.say(notice)
        }
    }
}

/// Prints the last lines and, with -F, follows; returns the exit status.
func run(_ options: Options, on loop: EventLoop) async -> Int32 {
    let copier = Copier(output: StandardIO.output(on: loop))
    var status: Int32 = 0
    do {
        if options.follow {
            try await follow(options, copier, on: loop)
        } else if let info = try? await FileSystem.stat(options.path, on: loop), info.type != .regular || info.size == 0 {
            // Not a file whose size says where its end is: read it through once (an error, a directory's
            // EISDIR included, is reported as for a file).
            try await copier.copyLastLines(options.lines, ofStream: options.path, on: loop)
        } else {
            try await FileSystem.withOpenFile(options.path, on: loop) { file in
                let size = Int(try await file.stat().first()!.size)
                let start = try await copier.startOfLastLines(options.lines, of: file, size: size)
                _ = try await copier.copyToEnd(of: file, from: start)
            }
        }
    } catch let failure as OutputFailed {
        // `| head` closing its end is the ordinary way for a reader to stop us.
        if (failure.underlying as? UVError)?.name != "EPIPE" {
            printError("tail: cannot write standard output: \(failure.underlying)")
            status = 1
        }
    } catch {
        printError("tail: \(options.path): \(error)")
        status = 1
    }
    if let error = await copier.output.close().waitUntilCompleted(), status == 0, (error as? UVError)?.name != "EPIPE" {
        printError("tail: cannot write standard output: \(error)")
        status = 1
    }
    if options.stats { printError("tail: bytes read: \(copier.bytesRead)") }
    return status
}

@main
struct Tail {
    static func main() async {
        let options = parseCommandLine(program: "tail", usage: usage, Options.parse)
        await runOnLoop(program: "tail") { loop in await run(options, on: loop) }
    }
}

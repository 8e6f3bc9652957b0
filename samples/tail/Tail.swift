// tail: prints the last lines of a file and, with -F, what is appended to it, following its name
// as GNU `tail -F` does.
//
//   tail [-n N] [-F] [--interval DURATION] [--stats] FILE
//
// With -F each change is read from where the last read stopped (the file is never read whole
// again), and FILE is followed across rotation (renamed away and a new file made), truncation, and
// delete + re-create. What was written to the old file before the switch is printed before the new
// file's first byte: a file renamed away is read until the name names a file again, however long
// that takes (its writer may go on appending until it reopens the name); a deleted one is let go.
// FILE's directory may be missing too, or removed and made again: it is watched again when it is back.
// A directory that takes FILE's name is said ("replaced with an untailable file") and waited out.
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

/// Whether a file of this type can be followed: not a directory or a block device (GNU tail's rule;
/// reading a directory fails with `EISDIR`).
func isTailable(_ info: FileInfo) -> Bool {
    info.type != .directory && info.type != .blockDevice
}

/// Whether `error` is `EACCES` or `EPERM` (FILE may not be read).
func isDenied(_ error: any Error) -> Bool {
    guard let name = (error as? UVError)?.name else { return false }
    return name == "EACCES" || name == "EPERM"
}

/// Whether `error` says inotify cannot watch the directory, which can still be looked at (`EACCES`: no read
/// permission on it; `ENOSPC`, `EMFILE`: the per-user watch or instance limit).
func isUnwatchable(_ error: any Error) -> Bool {
    guard let name = (error as? UVError)?.name else { return false }
    return ["EACCES", "EPERM", "ENOSPC", "EMFILE"].contains(name)
}

/// The directory FILE's name lives in: what the watch looks at, so that renames and creations of
/// the name are seen as well as appends.
func directory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

/// How one open file ended.
enum FileEnd {
    /// FILE names another file now: reopen it.
    case replaced
    /// FILE names nothing now: wait for it to appear.
    case removed
    /// FILE may not be read (a rotation made it for another user): try again at the next wake.
    case denied
    /// FILE names something that cannot be tailed (a directory): try again at the next wake.
    case untailable
    /// The wakes ended (the watch failed, or the loop is stopping).
    case stopped
}

/// `tail -F`: the last lines, then every append, following the name. Returns at Ctrl-C or when
/// the watch fails.
func follow(_ options: Options, _ copier: Copier, on loop: EventLoop) async throws {
    let path = options.path
    // Wakes: any change in the directory (an append to FILE, a rename, a creation, a deletion), and
    // a look every interval. Only the newest wake is kept: each one means "look again".
    // A directory that does not exist (yet), or is removed, ends the watch with ENOENT: it is watched
    // again an interval later, as GNU tail -F goes on, while the ticks keep looking for FILE meanwhile.
    // A directory inotify cannot watch (no read permission on it, the watch or instance limit reached)
    // leaves the ticks alone to look for changes, as GNU tail reverts to polling.
    let watched = directory(of: path)
    let interval = options.interval
    let watch = FileWatch.changes(at: watched, on: loop)
        .retry(upTo: Int.max, delay: options.interval, while: { isMissing($0) })
        .catch { error in
            guard isUnwatchable(error) else { return .error(error) }
            printError("tail: cannot watch '\(watched)' (\(error)); looking for changes every \(interval) instead")
            return .never
        }
        .map { _ in () }
    let ticks = Signal<Int>.interval(options.interval, on: loop).map { _ in () }
    let stop = interruptions(on: loop).map { _ in () }
    var wakes = watch.merge(with: ticks).take(until: stop).values(bufferingPolicy: .keepNewest(1)).makeAsyncIterator()

    var isFirstFile = true
    var missingSaid = false
    var deniedSaid = false
    var untailableSaid = false
    while true {
        let end: FileEnd
        do {
            end = try await FileSystem.withOpenFile(path, on: loop) { file in
                let opened = try await file.stat().first()!
                guard isTailable(opened) else { return .untailable }
                if deniedSaid || untailableSaid {
                    printError("tail: '\(path)' has become accessible")
                } else if missingSaid {
                    printError("tail: '\(path)' has appeared;  following new file")
                }
                missingSaid = false
                deniedSaid = false
                untailableSaid = false
                var offset = isFirstFile ? try await copier.startOfLastLines(options.lines, of: file, size: Int(opened.size)) : 0
                isFirstFile = false
                while true {
                    offset = try await copier.copyToEnd(of: file, from: offset)
                    guard try await wakes.next() != nil else { return .stopped }
                    if let size = try await file.size().first(), Int(size) < offset {
                        printError("tail: \(path): file truncated")
                        offset = 0
                        continue
                    }
                    let named: FileInfo?
                    do {
                        named = try await FileSystem.stat(path, on: loop)
                    } catch let error where isMissing(error) {
                        named = nil
                    }
                    if let named, named.device == opened.device, named.inode == opened.inode {
                        // Never gone, or renamed back: still the same file (said as GNU tail says it).
                        if missingSaid { printError("tail: '\(path)' has appeared;  following new file") }
                        missingSaid = false
                        continue
                    }
                    if named == nil {
                        if !missingSaid {
                            missingSaid = true
                            printError("tail: '\(path)' has become inaccessible: No such file or directory")
                        }
                        // Renamed away, with no new file yet: its writer may still append to it (it
                        // reopens the name later, as after logrotate's `nocreate`), so it is read until
                        // the name names a file again. A deleted file is let go: held open, its space
                        // would not be freed.
                        if let now = try await file.stat().first(), now.linkCount > 0 { continue }
                    }
                    // The name has moved on: what the old file still holds goes out first.
                    _ = try await copier.copyToEnd(of: file, from: offset)
                    guard let named else { return .removed }
                    return isTailable(named) ? .replaced : .untailable
                }
            }
        } catch let error where isMissing(error) {
            // FILE does not exist (yet, or between a rotation's rename and its creation).
            end = .removed
            if isFirstFile {
                isFirstFile = false
                missingSaid = true
                printError("tail: cannot open '\(path)' for reading: No such file or directory")
            }
        } catch let error where isDenied(error) {
            // FILE may not be read (made by a rotation for another user, or with mode 0600): tried again
            // at each wake, as GNU tail -F does, and followed from its start once it can be read.
            end = .denied
            isFirstFile = false
            if !deniedSaid {
                deniedSaid = true
                printError("tail: cannot open '\(path)' for reading: Permission denied")
            }
        }
        if end != .untailable { untailableSaid = false }
        switch end {
        case .replaced:
            // After "has become inaccessible" (the old file was followed meanwhile), the new file's
            // opening says "has appeared" instead.
            if !missingSaid { printError("tail: '\(path)' has been replaced;  following new file") }
        case .removed:
            if !missingSaid {
                missingSaid = true
                printError("tail: '\(path)' has become inaccessible: No such file or directory")
            }
            // Wait for the next change before trying again.
            guard try await wakes.next() != nil else { return }
        case .denied:
            guard try await wakes.next() != nil else { return }
        case .untailable:
            // A directory took the name (briefly, as a deploy's swap does): said once, and FILE is looked at
            // again at each wake, as GNU tail -F does, until a file it can follow has the name.
            if !untailableSaid {
                untailableSaid = true
                missingSaid = false
                if isFirstFile {
                    printError("tail: error reading '\(path)': Is a directory")
                    printError("tail: \(path): cannot follow end of this type of file")
                } else {
                    printError("tail: '\(path)' has been replaced with an untailable file")
                }
                isFirstFile = false
            }
            guard try await wakes.next() != nil else { return }
        case .stopped:
            return
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

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
import TailKit
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

/// Prints the last lines and, with -F, follows; returns the exit status.
func run(_ options: Options, on loop: EventLoop) async -> Int32 {
    let output = StandardIO.output(on: loop)
    let copier = Copier { output.write($0) }
    var status: Int32 = 0
    do {
        if options.follow {
            try await follow(options.path, lines: options.lines, interval: options.interval, copier, on: loop,
                             until: interruptions(on: loop).map { _ in () }, say: printError)
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
    if let error = await output.close().waitUntilCompleted(), status == 0, (error as? UVError)?.name != "EPIPE" {
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

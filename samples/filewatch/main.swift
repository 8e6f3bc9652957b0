// filewatch: prints one line per change to a file or directory (time, kind, name; a rename within the
// watch as "moved OLD -> NEW").
//
//   filewatch PATH [--recursive] [--poll 500ms]
import ReactiveUV
import SampleSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: filewatch PATH [--recursive] [--poll INTERVAL]
      PATH               the file or directory to watch
      --recursive        also watch every subdirectory, following new ones
      --poll INTERVAL    poll with stat every INTERVAL (e.g. 500ms) instead of inotify
    """

struct Options {
    var path = ""
    var recursive = false
    var poll: Duration?

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var path: String?
        var reader = ArgumentReader(arguments)
        while let argument = try reader.next() {
            switch argument {
            case "--recursive":
                options.recursive = true
            case "--poll":
                options.poll = try parseDuration(try reader.value(for: argument))
            default:
                guard !argument.hasPrefix("--") else { throw UsageError("unknown argument '\(argument)'") }
                guard path == nil else { throw UsageError("only one PATH can be watched, got '\(path!)' and '\(argument)'") }
                path = argument
            }
        }
        guard let path else { throw UsageError("PATH is required") }
        if options.recursive && options.poll != nil {
            throw UsageError("--recursive and --poll cannot be combined (polling watches one path)")
        }
        options.path = path
        return options
    }
}

/// The wall-clock time of day, `HH:MM:SS.mmm`.
func timeOfDay() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var parts = tm()
    var seconds = now.tv_sec
    localtime_r(&seconds, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let milliseconds = now.tv_nsec / 1_000_000
    let millisecondText = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
    return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millisecondText)"
}

func describe(_ change: FileStatusChange, name: String) -> String {
    switch (change.previous, change.current) {
    case (nil, let current?): return "created \(name) (size \(current.size))"
    case (let previous?, nil): return "deleted \(name) (was size \(previous.size))"
    case (let previous?, let current?): return "changed \(name) (size \(previous.size) -> \(current.size))"
    case (nil, nil): return "changed \(name)"
    }
}

func main() -> Int32 {
    let options = parseCommandLine(program: "filewatch", usage: usage, Options.parse)

    // The main thread becomes the loop thread: the watch starts inside subscribe and every callback runs here.
    // No file descriptor (or thread) left: one line on standard error, and a failure status.
    guard let loop = loopOnMainThread(program: "filewatch") else { return 1 }
    let subscriptions = CompoundDisposable()
    // State the callbacks share: confined to the loop (this thread), so the callbacks may capture it.
    let status = LoopBound(Int32(0), loop: loop)
    let fail: @Sendable (any Error) -> Void = { error in
        printError("filewatch: cannot watch \(options.path): \(error)")
        status.value = 1
        subscriptions.dispose()
    }

    let name = options.path.split(separator: "/").last.map(String.init) ?? options.path
    if let interval = options.poll {
        subscriptions.add(FileWatch.poll(at: options.path, interval: interval).subscribe(
            next: { change in printLine("\(timeOfDay()) \(describe(change, name: name))") },
            error: fail))
    } else {
        subscriptions.add(FileWatch.changes(at: options.path, recursive: options.recursive).subscribe(
            next: { event in printLine("\(timeOfDay()) \(event)") },
            error: fail))
    }
    if status.value != 0 {
        loop.shutdown()
        return 1
    }
    let how = options.poll.map { "polling every \($0)" } ?? (options.recursive ? "recursively" : "with inotify")
    printLine("watching \(options.path) \(how); Ctrl-C stops")

    subscriptions.add(interruptions().subscribeNext { number in
        printLine("interrupted by \(signalName(number)); stopping")
        subscriptions.dispose()
    })

    loop.run()
    let result = status.value
    loop.shutdown()
    return result
}

exit(main())

// timer: prints one line per tick of a loop timer, embedding the loop in the main thread.
//
//   timer --interval 250ms --count 5
import ReactiveUV
import SampleSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: timer [--interval DURATION] [--count N]
      --interval DURATION  time between ticks, e.g. 250ms, 1s, 1.5s (default 1s)
      --count N            ticks to print before exiting; 0 runs until Ctrl-C (default 5)
    """

struct Options {
    var interval: Duration = .seconds(1)
    var count = 5

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var reader = ArgumentReader(arguments)
        while let argument = try reader.next() {
            switch argument {
            case "--interval":
                options.interval = try parseDuration(try reader.value(for: argument))
            case "--count":
                let text = try reader.value(for: argument)
                guard let count = Int(text), count >= 0 else {
                    throw UsageError("--count needs a whole number of ticks (0 or more), got '\(text)'")
                }
                options.count = count
            default:
                throw UsageError("unknown argument '\(argument)'")
            }
        }
        return options
    }
}

func main() -> Int32 {
    let options = parseCommandLine(program: "timer", usage: usage, Options.parse)

    // The main thread becomes the loop thread: every callback below runs here.
    // No file descriptor (or thread) left: one line on standard error, and a failure status.
    guard let loop = loopOnMainThread(program: "timer") else { return 1 }
    let start = loop.now
    let subscriptions = CompoundDisposable()
    // State the callbacks share: confined to the loop (this thread), so the callbacks may capture it.
    let ticks = LoopBound(0, loop: loop)
    let status = LoopBound(Int32(0), loop: loop)

    subscriptions.add(Signal<Int>.interval(options.interval).subscribe(
        next: { _ in
            ticks.value += 1
            let elapsed = (loop.now - start).components
            let milliseconds = elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
            printLine("tick \(ticks.value) at \(milliseconds) ms")
            if options.count > 0 && ticks.value >= options.count { subscriptions.dispose() }
        },
        error: { error in
            printError("timer: \(error)")
            status.value = 1
            subscriptions.dispose()
        }))

    subscriptions.add(interruptions().subscribeNext { number in
        printLine("interrupted by \(signalName(number)) after \(ticks.value) tick(s); stopping")
        subscriptions.dispose()
    })

    // Returns once the subscriptions are disposed: nothing is left for the loop to do.
    loop.run()
    let result = status.value
    loop.shutdown()
    return result
}

exit(main())

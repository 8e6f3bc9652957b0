// lines: numbers the lines of standard input ("1: first line"), whatever standard input is
// (a pipe, a file, a terminal), and writes them to standard output with backpressure.
//
//   printf 'a\nb\n' | lines          lines < notes.txt          lines   (a prompt on a terminal)
//   lines --repeat y | head -c 100   a fast producer that a slow reader holds back
import LinesKit
import ReactiveUV
import SampleSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: lines [--repeat TEXT | --raw] [--stats]
      reads standard input and prints each line as "N: line"; exits 0 at its end
      (on a terminal it prompts with "> "; Ctrl-D ends the input)
      --repeat TEXT   ignore standard input and print "N: TEXT" for ever, as fast as the reader takes it
      --raw           (a terminal on standard input) raw mode: print each key's byte values as it is pressed;
                      Ctrl-D ends (exit 0), Ctrl-C exits 130 at once (the terminal is restored at exit)
      --stats         at exit, print the most output bytes that were waiting for the reader, to standard error
    """

struct Options {
    var repeatText: String?
    var stats = false
    var raw = false

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var reader = ArgumentReader(arguments)
        while let argument = try reader.next() {
            switch argument {
            case "--repeat": options.repeatText = try reader.value(for: argument)
            case "--stats": options.stats = true
            case "--raw": options.raw = true
            default: throw UsageError("unknown argument '\(argument)'")
            }
        }
        if options.raw && options.repeatText != nil { throw UsageError("--raw and --repeat cannot be combined") }
        return options
    }
}

/// Runs the sample on `loop`'s thread; returns the exit status.
func run(_ options: Options, on loop: EventLoop) async -> Int32 {
    if options.raw {
        var writer = LineWriter(output: StandardIO.output(on: loop))
        return await readKeys(&writer, on: loop)
    }
    let prompt = options.repeatText == nil && TTY.isTerminal(0) && TTY.isTerminal(1) ? "> " : ""
    return await numberLines(repeating: options.repeatText, prompt: prompt, stats: options.stats, on: loop, say: printError)
}

/// `--raw`: the terminal in raw mode, each key's bytes printed as they come. Returns the exit status.
func readKeys(_ writer: inout LineWriter, on loop: EventLoop) async -> Int32 {
    do {
        try TTY.setMode(.raw)
    } catch {
        printError("lines: --raw needs a terminal on standard input: \(error)")
        return 2
    }
    var failure = await writer.emitAndWait("raw mode: press keys; Ctrl-D ends, Ctrl-C exits at once\n")
    do {
        keys: for try await chunk in StandardIO.input(on: loop).values {
            if chunk.contains(3) {
                // Ctrl-C arrives as a byte in raw mode. Exit now: the exit hook puts the terminal back.
                printError("lines: Ctrl-C")
                exit(130)
            }
            if chunk.contains(4) { break keys }
            failure = await writer.emitAndWait("key \(chunk.map(String.init).joined(separator: " "))\n")
            if failure != nil { break keys }
        }
    } catch {
        failure = failure ?? error
    }
    do {
        try TTY.setMode(.normal)
    } catch {
        failure = failure ?? error
    }
    if let error = await writer.output.close().waitUntilCompleted(), failure == nil { failure = error }
    if let failure {
        printError("lines: \(failure)")
        return 1
    }
    return 0
}

@main
struct Lines {
    static func main() async {
        let options = parseCommandLine(program: "lines", usage: usage, Options.parse)
        await runOnLoop(program: "lines") { loop in await run(options, on: loop) }
    }
}

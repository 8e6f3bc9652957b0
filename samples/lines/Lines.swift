// lines: numbers the lines of standard input ("1: first line"), whatever standard input is
// (a pipe, a file, a terminal), and writes them to standard output with backpressure.
//
//   printf 'a\nb\n' | lines          lines < notes.txt          lines   (a prompt on a terminal)
//   lines --repeat y | head -c 100   a fast producer that a slow reader holds back
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

/// Writes lines to standard output, its queue kept near `highWaterMark` (past it by at most the
/// lines of one input chunk, which are queued together).
///
/// Each piece is sent without a result to wait for (the writer gathers small
/// writes into one `write(2)` while earlier ones are on their way), except
/// one now and then: once the queue is above the mark (the reader is slower
/// than we are), or after `batch` pieces in any case, so that a failed write
/// (the reader went away: `EPIPE`) is seen soon. The caller waits for that
/// one (`settle()`) before it produces more. Confined to the loop's task.
struct LineWriter {
    static let highWaterMark = 64 << 10
    static let batch = 1024
    let output: StandardWriter
    private var writesSinceWait = 0
    private var awaited: Signal<Void>?
    private(set) var mostQueued = 0

    init(output: StandardWriter) { self.output = output }

    /// Whether the caller should `settle()` before producing more.
    var mustSettle: Bool { awaited != nil }

    /// Queues `piece`, marking it as the one to wait for when the queue is high or a batch has gone by.
    mutating func emit(_ piece: [UInt8]) {
        writesSinceWait += 1
        let queued = output.queuedWriteByteCount
        mostQueued = max(mostQueued, queued + piece.count)
        if awaited == nil, writesSinceWait >= LineWriter.batch || queued + piece.count > LineWriter.highWaterMark {
            writesSinceWait = 0
            awaited = output.write(piece)
        } else {
            output.send(piece)
        }
    }

    /// Queues `text` and waits until it was written; returns the output's error, if it has failed.
    mutating func emitAndWait(_ text: String) async -> (any Error)? {
        if let error = await settle() { return error }
        writesSinceWait = 0
        let written = output.write(text)
        mostQueued = max(mostQueued, output.queuedWriteByteCount)
        return await written.waitUntilCompleted()
    }

    /// Waits for the write `emit` marked, if any; returns the output's error, if it has failed.
    mutating func settle() async -> (any Error)? {
        guard let awaited else { return nil }
        self.awaited = nil
        return await awaited.waitUntilCompleted()
    }
}

/// Whether `error` is the reader of standard output having gone away.
func isBrokenPipe(_ error: any Error) -> Bool {
    (error as? UVError)?.name == "EPIPE"
}

/// Runs the sample on `loop`'s thread; returns the exit status.
func run(_ options: Options, on loop: EventLoop) async -> Int32 {
    var writer = LineWriter(output: StandardIO.output(on: loop))
    var number = 0
    var failure: (any Error)?
    var inputFailure: (any Error)?
    if options.raw {
        return await readKeys(&writer, on: loop)
    }
    if let text = options.repeatText {
        let line = Array(text.utf8) + [0x0A]
        while failure == nil {
            number += 1
            writer.emit(Array("\(number): ".utf8) + line)
            if writer.mustSettle { failure = await writer.settle() }
        }
    } else {
        let prompt = TTY.isTerminal(0) && TTY.isTerminal(1) ? "> " : ""
        var numberer = LineNumberer(prompt: Array(prompt.utf8))
        failure = await writer.emitAndWait(prompt)
        do {
            // Chunks, not lines, cross into the task: the lines of each are numbered and queued at once.
            for try await chunk in StandardIO.input(on: loop).values {
                numberer.number(chunk) { writer.emit($0) }
                if writer.mustSettle { failure = await writer.settle() }
                if failure != nil { break }
            }
        } catch {
            inputFailure = error
        }
        if failure == nil, let last = numberer.finish() { writer.emit(last) }
        number = numberer.number
        if failure == nil, !prompt.isEmpty { failure = await writer.emitAndWait("\n") }
    }
    // Whatever is still queued goes out before the writer closes (unless the output already failed).
    if let error = await writer.output.close().waitUntilCompleted(), failure == nil { failure = error }
    if options.stats { printError("lines: most output bytes queued: \(writer.mostQueued)") }
    if let inputFailure {
        printError("lines: cannot read standard input: \(inputFailure)")
        return 1
    }
    if let failure {
        // `| head` closing its end is the ordinary way for a reader to stop us: a note, not a failure.
        if isBrokenPipe(failure) {
            printError("lines: standard output was closed by its reader after \(number) lines; stopping")
            return 0
        }
        printError("lines: cannot write standard output: \(failure)")
        return 1
    }
    return 0
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

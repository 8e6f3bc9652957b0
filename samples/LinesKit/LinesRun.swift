import ReactiveUV

/// Writes lines to standard output, its queue kept near `highWaterMark` (past it by at most the
/// lines of one input chunk, which are queued together).
///
/// Each piece is sent without a result to wait for (the writer gathers small
/// writes into one `write(2)` while earlier ones are on their way), except
/// one now and then: once the queue is above the mark (the reader is slower
/// than we are), or after `batch` pieces in any case, so that a failed write
/// (the reader went away: `EPIPE`) is seen soon. The caller waits for that
/// one (`settle()`) before it produces more.
///
/// Thread rule: confined to the loop's task that made it.
public struct LineWriter {
    /// The queued bytes past which a piece is waited for.
    ///
    /// Thread rule: safe from any thread.
    public static let highWaterMark = 64 << 10
    /// Every `batch`-th piece is waited for, whatever the queue.
    ///
    /// Thread rule: safe from any thread.
    public static let batch = 1024
    /// Where the lines go.
    ///
    /// Thread rule: safe from any thread (a `StandardWriter` is).
    public let output: StandardWriter
    private var writesSinceWait = 0
    private var awaited: Signal<Void>?
    /// The most bytes that were queued for the reader at once.
    ///
    /// Thread rule: the writer's task.
    public private(set) var mostQueued = 0

    /// A writer to `output`, nothing queued yet.
    ///
    /// Thread rule: the task that will use it.
    public init(output: StandardWriter) { self.output = output }

    /// Whether the caller should `settle()` before producing more.
    ///
    /// Thread rule: the writer's task.
    public var mustSettle: Bool { awaited != nil }

    /// Queues `piece`, marking it as the one to wait for when the queue is high or a batch has gone by.
    ///
    /// Thread rule: the writer's task.
    public mutating func emit(_ piece: [UInt8]) {
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
    ///
    /// Thread rule: the writer's task.
    public mutating func emitAndWait(_ text: String) async -> (any Error)? {
        if let error = await settle() { return error }
        writesSinceWait = 0
        let written = output.write(text)
        mostQueued = max(mostQueued, output.queuedWriteByteCount)
        return await written.waitUntilCompleted()
    }

    /// Waits for the write `emit` marked, if any; returns the output's error, if it has failed.
    ///
    /// Thread rule: the writer's task.
    public mutating func settle() async -> (any Error)? {
        guard let awaited else { return nil }
        self.awaited = nil
        return await awaited.waitUntilCompleted()
    }
}

/// Whether `error` is the reader of standard output having gone away (`EPIPE`).
///
/// Thread rule: safe from any thread.
public func isBrokenPipe(_ error: any Error) -> Bool {
    (error as? UVError)?.name == "EPIPE"
}

/// The `lines` sample without its terminal modes: numbers the lines of standard input on
/// standard output (`"N: line"`, `prompt` after each), or with `repeating` prints `"N: TEXT"` for
/// ever, with backpressure, until the input ends or the output fails.
///
/// A reader of the output that went away (`EPIPE`, as `| head` does) ends it with a note and
/// status 0, whether the input ends or not; another failure is said and gives 1.
///
/// - Parameters:
///   - repeating: The line to repeat instead of reading standard input, or nil.
///   - prompt: Written first, after each line, and followed by a newline at the end ("" for none).
///   - stats: Say the most output bytes queued at the end.
///   - loop: The loop whose standard input and output are used (a simulated loop: the simulation's).
///   - say: Where messages for standard error go, one line each.
/// - Returns: The exit status: 0, or 1 when standard input or output failed.
///
/// Thread rule: run it in a task on `loop` (`loop.task`).
public func numberLines(repeating: String?, prompt: String, stats: Bool, on loop: EventLoop,
                        say: (String) -> Void) async -> Int32 {
    var writer = LineWriter(output: StandardIO.output(on: loop))
    var number = 0
    var failure: (any Error)?
    var inputFailure: (any Error)?
    if let text = repeating {
        let line = Array(text.utf8) + [0x0A]
        while failure == nil {
            number += 1
            writer.emit(Array("\(number): ".utf8) + line)
            if writer.mustSettle { failure = await writer.settle() }
        }
    } else {
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
    if stats { say("lines: most output bytes queued: \(writer.mostQueued)") }
    if let inputFailure {
        say("lines: cannot read standard input: \(inputFailure)")
        return 1
    }
    if let failure {
        // `| head` closing its end is the ordinary way for a reader to stop us: a note, not a failure.
        if isBrokenPipe(failure) {
            say("lines: standard output was closed by its reader after \(number) lines; stopping")
            return 0
        }
        say("lines: cannot write standard output: \(failure)")
        return 1
    }
    return 0
}

import ReactiveUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--help` or `-h` where an argument was expected: the sample prints its usage and exits 0.
public struct HelpRequested: Error, CustomStringConvertible {
    /// Creates the request.
    ///
    /// Thread rule: safe from any thread.
    public init() {}

    /// `"help requested"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { "help requested" }
}

/// Parses the command line (without the program name) with `parse`, the way every sample does:
/// `HelpRequested` prints `usage` to standard output and exits 0; any other error prints
/// `"program: error"` and `usage` to standard error and exits 2.
///
/// - Parameters:
///   - program: The sample's name, for the message.
///   - usage: The usage text.
///   - parse: Turns the arguments into options, or throws `UsageError` or `HelpRequested`.
/// - Returns: The options; the process has exited if there are none.
///
/// Thread rule: main thread, before any loop runs.
public func parseCommandLine<Options>(program: String, usage: String, _ parse: ([String]) throws -> Options) -> Options {
    do {
        return try parse(Array(CommandLine.arguments.dropFirst()))
    } catch is HelpRequested {
        printLine(usage)
        exit(0)
    } catch {
        printError("\(program): \(error)")
        printError(usage)
        exit(2)
    }
}

/// Makes the calling thread (the sample's main thread) a loop thread named `program`: every
/// callback then runs on it, and `loop.run()` returns once nothing is left to do.
///
/// - Parameter program: The sample's name: the loop's name and the message's prefix.
/// - Returns: The loop; nil when there is none to be had (no file descriptor or thread
///   left), after printing one line `"program: error"` to standard error. Exit 1 then.
///
/// Thread rule: the main thread, once.
public func loopOnMainThread(program: String) -> EventLoop? {
    do {
        return try EventLoop.tryOnCurrentThread(name: program)
    } catch {
        printError("\(program): \(error)")
        return nil
    }
}

/// SIGINT and SIGTERM, the ways a user stops a sample (Ctrl-C, `kill`): each arrives as its number.
///
/// - Parameter loop: The loop to watch on; the subscriber's loop when nil.
/// - Returns: The signal.
///
/// Thread rule: safe from any thread.
public func interruptions(on loop: EventLoop? = nil) -> Signal<Int32> {
    Signal<Int32>.unixSignals([SIGINT, SIGTERM], on: loop)
}

/// `"SIGINT"`, `"SIGTERM"`, or `"signal N"` for another number.
///
/// - Parameter number: The signal number.
/// - Returns: Its name.
///
/// Thread rule: safe from any thread.
public func signalName(_ number: Int32) -> String {
    switch number {
    case SIGINT: "SIGINT"
    case SIGTERM: "SIGTERM"
    default: "signal \(number)"
    }
}

/// A peer's address for a message, or `"(unknown address)"` when the socket could not say.
///
/// - Parameter peer: The address.
/// - Returns: The text.
///
/// Thread rule: safe from any thread.
public func describe(_ peer: SocketAddress?) -> String { peer?.description ?? "(unknown address)" }

/// The `main` of a sample written with async/await: runs `body` in a task on a new loop named
/// `program`, shuts the loop down, and exits with the status `body` returned.
///
/// - Parameters:
///   - program: The sample's name: the loop's name and the prefix of a shutdown failure's message.
///   - body: The sample's work, on the loop's executor; returns the exit status.
///
/// Main-actor isolated so that the loop is made before the first hop to another executor:
/// Dispatch's worker threads open descriptors, and the first loop must see 0, 1 and 2 as the
/// process got them (`StandardIO` reports a closed one as `EBADF`).
///
/// Thread rule: the main task, once.
@MainActor
public func runOnLoop(program: String, _ body: @escaping @Sendable (EventLoop) async -> Int32) async -> Never {
    let loop = EventLoop(name: program)
    let status = await withTaskGroup(of: Int32.self) { group in
        group.addTask(executorPreference: loop) { await body(loop) }
        return await group.next() ?? 1
    }
    do {
        _ = try await loop.shutdownGracefully()
    } catch {
        printError("\(program): stopping the loop: \(error)")
    }
    exit(status)
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A command-line mistake: printed with the usage text, exit status 2.
///
/// Thread rule: a value type; safe from any thread.
public struct UsageError: Error, CustomStringConvertible {
    /// What was wrong.
    ///
    /// Thread rule: safe from any thread.
    public let description: String

    /// Creates an error with a message.
    ///
    /// - Parameter description: What was wrong.
    /// - Returns: The error.
    ///
    /// Thread rule: safe from any thread.
    public init(_ description: String) { self.description = description }
}

/// Parses durations written like `250ms`, `1s`, `1.5s`, `2m`, `500us`.
///
/// - Parameter text: The text.
/// - Returns: The duration.
/// - Throws: `UsageError` if the text is not a positive number with a unit.
///
/// Thread rule: safe from any thread.
public func parseDuration(_ text: String) throws -> Duration {
    let units: [(String, Double)] = [("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1), ("m", 60), ("h", 3600)]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        let number = text.dropLast(suffix.count)
        guard let value = Double(number), value.isFinite, value > 0, value * scale < 1e9 else { break }
        return .nanoseconds(Int64((value * scale * 1e9).rounded(.up)))
    }
    throw UsageError("'\(text)' is not a duration: write a positive number with a unit, e.g. 250ms, 1s, 1.5s, 2m")
}

/// Walks `--flag value` style arguments.
///
/// Thread rule: a value type; use each copy from one thread at a time.
public struct ArgumentReader {
    private var arguments: ArraySlice<String>

    /// Reads `arguments` (without the program name).
    ///
    /// - Parameter arguments: The arguments.
    /// - Returns: A reader.
    ///
    /// Thread rule: safe from any thread.
    public init(_ arguments: [String]) { self.arguments = arguments[...] }

    /// The next argument, or nil at the end.
    ///
    /// - Returns: The argument.
    /// - Throws: `HelpRequested` when it is `--help` or `-h`.
    ///
    /// Thread rule: one thread at a time.
    public mutating func next() throws -> String? {
        let argument = arguments.popFirst()
        if argument == "--help" || argument == "-h" { throw HelpRequested() }
        return argument
    }

    /// The value that must follow `flag`.
    ///
    /// - Parameter flag: The flag, for the message.
    /// - Returns: The value.
    /// - Throws: `UsageError` if there is none.
    ///
    /// Thread rule: one thread at a time.
    public mutating func value(for flag: String) throws -> String {
        guard let value = arguments.popFirst(), !value.hasPrefix("--") else {
            throw UsageError("\(flag) needs a value")
        }
        return value
    }

    /// The TCP port number that must follow `flag` (0 picks a free one).
    ///
    /// - Parameter flag: The flag, for the message.
    /// - Returns: The port, 0...65535.
    /// - Throws: `UsageError` if there is none or it is not a port number.
    ///
    /// Thread rule: one thread at a time.
    public mutating func port(for flag: String) throws -> Int {
        let text = try value(for: flag)
        guard let port = Int(text), (0...65_535).contains(port) else {
            throw UsageError("\(flag) needs a port number from 0 to 65535, got '\(text)'")
        }
        return port
    }

    /// The whole number that must follow `flag`, within `range` (`--loops`, `--max-connections`).
    ///
    /// - Parameters:
    ///   - flag: The flag, for the message.
    ///   - range: The numbers allowed.
    /// - Returns: The number.
    /// - Throws: `UsageError` if there is none or it is not a whole number in `range`.
    ///
    /// Thread rule: one thread at a time.
    public mutating func count(for flag: String, in range: ClosedRange<Int>) throws -> Int {
        let text = try value(for: flag)
        guard let count = Int(text), range.contains(count) else {
            let allowed = range.upperBound == Int.max ? "of at least \(range.lowerBound)" : "from \(range.lowerBound) to \(range.upperBound)"
            throw UsageError("\(flag) needs a whole number \(allowed), got '\(text)'")
        }
        return count
    }

    /// The number of seconds that must follow `flag`, above 0 and at most a day (`--drain-timeout`), as a duration
    /// rounded up to the millisecond.
    ///
    /// - Parameter flag: The flag, for the message.
    /// - Returns: The duration.
    /// - Throws: `UsageError` if there is none or it is not such a number.
    ///
    /// Thread rule: one thread at a time.
    public mutating func seconds(for flag: String) throws -> Duration {
        let text = try value(for: flag)
        guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= 86_400 else {
            throw UsageError("\(flag) needs a number of seconds above 0 and at most 86400, got '\(text)'")
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }
}

/// Writes a line to standard error, unbuffered.
///
/// - Parameter text: The text (a newline is added).
///
/// Thread rule: safe from any thread (one `write` per chunk; lines from two threads may interleave).
public func printError(_ text: String) { writeLine(text, to: 2) }

/// Writes a line to standard output, unbuffered, so it reaches a pipe at once.
///
/// - Parameter text: The text (a newline is added).
///
/// Thread rule: safe from any thread (one `write` per chunk; lines from two threads may interleave).
public func printLine(_ text: String) { writeLine(text, to: 1) }

private func writeLine(_ text: String, to descriptor: Int32) {
    var line = text + "\n"
    line.withUTF8 { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}

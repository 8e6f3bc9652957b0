#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A command-line mistake: printed with the usage text, exit status 2.
public struct UsageError: Error, CustomStringConvertible {
    /// What was wrong.
    public let description: String

    /// Creates an error with a message.
    ///
    /// - Parameter description: What was wrong.
    /// - Returns: The error.
    public init(_ description: String) { self.description = description }
}

/// Parses durations written like `250ms`, `1s`, `1.5s`, `2m`, `500us`.
///
/// - Parameter text: The text.
/// - Returns: The duration.
/// - Throws: `UsageError` if the text is not a positive number with a unit.
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
public struct ArgumentReader {
    private var arguments: ArraySlice<String>

    /// Reads `arguments` (without the program name).
    ///
    /// - Parameter arguments: The arguments.
    /// - Returns: A reader.
    public init(_ arguments: [String]) { self.arguments = arguments[...] }

    /// The next argument, or nil at the end.
    ///
    /// - Returns: The argument.
    public mutating func next() -> String? { arguments.popFirst() }

    /// The value that must follow `flag`.
    ///
    /// - Parameter flag: The flag, for the message.
    /// - Returns: The value.
    /// - Throws: `UsageError` if there is none.
    public mutating func value(for flag: String) throws -> String {
        guard let value = arguments.popFirst(), !value.hasPrefix("--") else {
            throw UsageError("\(flag) needs a value")
        }
        return value
    }
}

/// Writes a line to standard error, unbuffered.
///
/// - Parameter text: The text (a newline is added).
public func printError(_ text: String) { writeLine(text, to: 2) }

/// Writes a line to standard output, unbuffered, so it reaches a pipe at once.
///
/// - Parameter text: The text (a newline is added).
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

import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// One write a simulated process made to its standard output or error (`StandardIO.output`,
/// `StandardIO.error`, or a child whose output is `.inherit`), with its virtual time.
///
/// Thread rule: a value; safe from any thread.
public struct SimulationOutput: Sendable, Equatable, CustomStringConvertible {
    /// When it was written.
    public let time: SchedulerInstant
    /// The loop that wrote it.
    public let loopName: String
    /// What was written.
    public let bytes: [UInt8]

    /// The bytes as UTF-8 (invalid sequences repaired).
    ///
    /// Thread rule: safe from any thread.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// `"1.000 ms  loop 'sim': \"hello\\n\""`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        let micros = time.nanoseconds / 1_000
        return "\(micros / 1_000).\(String(micros % 1_000 + 1_000).dropFirst()) ms  loop '\(loopName)': \(text.debugDescription)"
    }
}

extension Simulation {
    /// Scripts standard input: `bytes` arrive at `time` (virtual, from the start of the
    /// simulation), after what is scripted for the same time. `StandardIO.input` on the
    /// simulation's loops reads them once they arrived, as chunks of at most 64 KiB; what no
    /// reader took stays for the next. A time already passed counts as now.
    ///
    /// - Throws: `SimulationMisuse` for a negative time, or a time after the scripted end
    ///   (`closeStandardInput(at:)`); nothing is scripted.
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public func writeStandardInput(_ bytes: [UInt8], at time: Duration) throws(SimulationMisuse) {
        if time < .zero { throw SimulationMisuse("writeStandardInput: the time must not be negative, got \(time)") }
        if let refusal = system.scriptInput(bytes, at: time.clampedNanoseconds) {
            throw SimulationMisuse("writeStandardInput: \(refusal)")
        }
    }

    /// Scripts standard input: `text` as UTF-8 arrives at `time`; see `writeStandardInput(_:at:)`.
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public func writeStandardInput(_ text: String, at time: Duration) throws(SimulationMisuse) {
        try writeStandardInput(Array(text.utf8), at: time)
    }

    /// Scripts the end of standard input (EOF) at `time`: a reader completes once it took every
    /// byte before it; a later reader completes at once. Without it, standard input never ends.
    ///
    /// - Throws: `SimulationMisuse` for a negative time, a second end, or bytes scripted after `time`.
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public func closeStandardInput(at time: Duration) throws(SimulationMisuse) {
        if time < .zero { throw SimulationMisuse("closeStandardInput: the time must not be negative, got \(time)") }
        if let refusal = system.scriptEndOfInput(at: time.clampedNanoseconds) {
            throw SimulationMisuse("closeStandardInput: \(refusal)")
        }
    }

    /// Makes the reader of standard output go away at `time` (virtual, from the start; a time
    /// passed counts as now), as `| head` does once it has its lines: from then on a write to it
    /// fails with `EPIPE` and the writer stays failed (a child whose output is `.inherit` dies of
    /// SIGPIPE). What was written before stays in `standardOutput`.
    ///
    /// - Throws: `SimulationMisuse` for a negative time.
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public func closeStandardOutput(at time: Duration) throws(SimulationMisuse) {
        try closeOutput(1, at: time, "closeStandardOutput")
    }

    /// Makes the reader of standard error go away at `time`; see `closeStandardOutput(at:)`.
    ///
    /// - Throws: `SimulationMisuse` for a negative time.
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public func closeStandardError(at time: Duration) throws(SimulationMisuse) {
        try closeOutput(2, at: time, "closeStandardError")
    }

    private func closeOutput(_ descriptor: Int32, at time: Duration, _ what: String) throws(SimulationMisuse) {
        if time < .zero { throw SimulationMisuse("\(what): the time must not be negative, got \(time)") }
        system.outputClosesAt[descriptor] = min(system.outputClosesAt[descriptor] ?? .max, time.clampedNanoseconds)
    }

    /// Every write to standard output so far, in order, with its virtual time.
    ///
    /// Thread rule: the driving thread.
    public var standardOutput: [SimulationOutput] { captured(1) }

    /// Every write to standard error so far, in order, with its virtual time.
    ///
    /// Thread rule: the driving thread.
    public var standardError: [SimulationOutput] { captured(2) }

    /// Everything written to standard output so far, as UTF-8.
    ///
    /// Thread rule: the driving thread.
    public var standardOutputText: String { String(decoding: captured(1).flatMap(\.bytes), as: UTF8.self) }

    /// Everything written to standard error so far, as UTF-8.
    ///
    /// Thread rule: the driving thread.
    public var standardErrorText: String { String(decoding: captured(2).flatMap(\.bytes), as: UTF8.self) }

    private func captured(_ descriptor: Int32) -> [SimulationOutput] {
        (system.captured[descriptor] ?? []).map {
            SimulationOutput(time: SchedulerInstant(nanoseconds: $0.at), loopName: $0.loopName, bytes: $0.bytes)
        }
    }
}

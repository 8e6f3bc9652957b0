import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// One fault of a simulated network, written down: what a seeded run injected
/// (`Simulation.injectedFaults`), or a plan given instead of the seed's draws
/// (`Simulation(seed:faultPlan:)`), which `Simulation.shrink(seed:faults:_:)` cuts down.
///
/// Times are virtual, from the start of the simulation. Its `description` is Swift code:
/// `.reset(connection: 3, at: .milliseconds(40))`, to paste into a plan.
///
/// Thread rule: a value; safe from any thread.
public enum SimulationFault: Sendable, Equatable, CustomStringConvertible {
    /// The TCP connection numbered `connection` (from 1, in the order of the `TCP.connect`s on
    /// the simulated network, refused ones included) is reset both ways at `at`; at once when it
    /// is accepted later than that. A connection that ended before `at` is left alone.
    case reset(connection: Int, at: Duration)
    /// The hosts (loops, by name) `first` and `second` are cut off from each other from `at` for
    /// `duration`: their packets wait and land a latency after the heal, as TCP retransmits.
    case partition(_ first: String, _ second: String, at: Duration, for: Duration)
    /// The first `Files.write` to `path` (absolute, as the program names it), or write of an
    /// `OpenFile` opened there, at or after `at` fails with `ENOSPC`; `Files.write` makes or
    /// empties the file first, as a full disk leaves it, an `OpenFile`'s write changes nothing.
    case noSpace(path: String, at: Duration)
    /// The first open of `path` (a whole-file read or write, `Files.open`) at or after `at` fails with `EMFILE`.
    case tooManyOpenFiles(path: String, at: Duration)
    /// The first read of `path` at or after `at` fails with `EIO`.
    case readError(path: String, at: Duration)
    /// The kernel's event queue of the watch of `path` (`FileWatch.changes`, a file or a directory) overflows at
    /// its first change at or after `at`: that change's event is lost and `.eventsLost` is sent in its place.
    case watchOverflow(path: String, at: Duration)
    /// Lookups of the name `host` started from `at` through `at + duration` fail with `EAI_AGAIN`,
    /// as when no DNS server answers (`duration` zero: those started at `at`).
    case dnsFailure(host: String, at: Duration, for: Duration)
    /// The UDP datagram numbered `datagram` (from 1, in the order of the sends on the simulated
    /// network) is lost. It has no time of its own: `time` is zero.
    case dropDatagram(datagram: Int)
    /// At `at` the virtual clock jumps forward by `by`, as after a suspended machine: every timer
    /// and packet due meanwhile runs late, at once, in deadline order.
    case clockJump(by: Duration, at: Duration)
    /// A fault of a child process (`SimulationProcessFault`), written `.childCrash(...)`.
    case process(SimulationProcessFault)

    /// When the fault strikes, from the start of the simulation.
    ///
    /// Thread rule: safe from any thread.
    public var time: Duration {
        switch self {
        case .reset(_, let at), .partition(_, _, let at, _), .noSpace(_, let at), .tooManyOpenFiles(_, let at),
             .readError(_, let at), .watchOverflow(_, let at), .dnsFailure(_, let at, _), .clockJump(_, let at): at
        case .dropDatagram: .zero
        case .process(let fault): fault.time
        }
    }

    /// The fault as Swift code, e.g. `.partition("server", "client-0", at: .seconds(2), for: .milliseconds(300))`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .reset(let connection, let at):
            ".reset(connection: \(connection), at: \(Self.swiftCode(at)))"
        case .partition(let first, let second, let at, let duration):
            ".partition(\(Self.quoted(first)), \(Self.quoted(second)), at: \(Self.swiftCode(at)), for: \(Self.swiftCode(duration)))"
        case .noSpace(let path, let at):
            ".noSpace(path: \(Self.quoted(path)), at: \(Self.swiftCode(at)))"
        case .tooManyOpenFiles(let path, let at):
            ".tooManyOpenFiles(path: \(Self.quoted(path)), at: \(Self.swiftCode(at)))"
        case .readError(let path, let at):
            ".readError(path: \(Self.quoted(path)), at: \(Self.swiftCode(at)))"
        case .watchOverflow(let path, let at):
            ".watchOverflow(path: \(Self.quoted(path)), at: \(Self.swiftCode(at)))"
        case .dnsFailure(let host, let at, let duration):
            ".dnsFailure(host: \(Self.quoted(host)), at: \(Self.swiftCode(at)), for: \(Self.swiftCode(duration)))"
        case .dropDatagram(let datagram):
            ".dropDatagram(datagram: \(datagram))"
        case .clockJump(let by, let at):
            ".clockJump(by: \(Self.swiftCode(by)), at: \(Self.swiftCode(at)))"
        case .process(let fault):
            fault.description
        }
    }

    /// `faults` as a Swift array literal, one fault a line: what a test pastes as its plan.
    ///
    /// Thread rule: safe from any thread.
    public static func swiftCode(_ faults: [SimulationFault]) -> String {
        guard !faults.isEmpty else { return "[]" }
        return "[\n" + faults.map { "    \($0)," }.joined(separator: "\n") + "\n]"
    }

    /// What is wrong with this fault, or nil.
    var refusal: String? {
        switch self {
        case .reset(let connection, let at):
            if connection < 1 { return "a reset's connection number starts at 1, got \(connection)" }
            if at < .zero { return "a reset's time must not be negative, got \(at)" }
        case .partition(let first, let second, let at, let duration):
            if first == second { return "a partition needs two hosts, got '\(first)' twice" }
            if at < .zero { return "a partition's time must not be negative, got \(at)" }
            if duration < .zero { return "a partition's duration must not be negative, got \(duration)" }
        case .noSpace(let path, let at), .tooManyOpenFiles(let path, let at), .readError(let path, let at),
             .watchOverflow(let path, let at):
            if path.isEmpty { return "a file fault needs a path, got an empty one" }
            if at < .zero { return "a file fault's time must not be negative, got \(at)" }
        case .dnsFailure, .dropDatagram, .clockJump:
            return networkRefusal
        case .process(let fault):
            return fault.refusal
        }
        return nil
    }

    /// The largest whole unit that states `duration` exactly, as Swift code.
    static func swiftCode(_ duration: Duration) -> String {
        let nanoseconds = duration.clampedNanoseconds
        for (unit, size) in [("seconds", UInt64(1_000_000_000)), ("milliseconds", 1_000_000), ("microseconds", 1_000)]
        where nanoseconds >= size && nanoseconds % size == 0 {
            return ".\(unit)(\(nanoseconds / size))"
        }
        return nanoseconds == 0 ? ".zero" : ".nanoseconds(\(nanoseconds))"
    }

    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

extension Simulation {
    /// A simulation whose network faults are `faultPlan` instead of the seed's draws: its resets
    /// replace those `resetPerMille` would draw (the draws are still made, so latency, jitter
    /// and short reads keep the seed's numbers), its partitions are set now for their times.
    /// Partitions asked later with `partition(_:_:for:)` or `inject(_:)` still apply.
    ///
    /// - Throws: `SimulationMisuse` naming the first bad fault (a connection number below 1, a
    ///   negative time or duration, a partition of a host with itself).
    ///
    /// Thread rule: the thread that will drive it.
    public convenience init(seed: UInt64, loopName: String = "sim", faultPlan: [SimulationFault]) throws(SimulationMisuse) {
        for fault in faultPlan {
            if let refusal = fault.refusal { throw SimulationMisuse("fault plan: \(refusal) in \(fault)") }
        }
        self.init(seed: seed, loopName: loopName)
        network.drawsResets = false
        system.drawsCrashes = false
        for fault in faultPlan { try inject(fault) }
    }

    /// Injects one fault now, seeded or planned alike: a reset for a connection (made or to be
    /// made), or a partition from its time (a time already passed counts from now). It joins
    /// `injectedFaults`.
    ///
    /// - Throws: `SimulationMisuse` for a bad fault (see `init(seed:loopName:faultPlan:)`), or a
    ///   reset of a connection already accepted; nothing is changed.
    ///
    /// Thread rule: the driving thread.
    public func inject(_ fault: SimulationFault) throws(SimulationMisuse) {
        if let refusal = fault.refusal { throw SimulationMisuse("inject: \(refusal) in \(fault)") }
        switch fault {
        case .reset(let connection, let at):
            if network.connectionsAccepted.contains(connection) {
                throw SimulationMisuse("inject: connection \(connection) was already accepted; plan its reset before it connects")
            }
            network.plannedResets[connection] = at.clampedNanoseconds
        case .partition(let first, let second, let at, let duration):
            let start = max(at.clampedNanoseconds, now.nanoseconds)
            let (heal, overflow) = at.clampedNanoseconds.addingReportingOverflow(duration.clampedNanoseconds)
            network.partition(first, second, from: start, until: overflow ? .max : heal)
            faultsArmed.append(fault)
        case .noSpace(let path, let at):
            files.arm(.noSpace, path: path, at: at.clampedNanoseconds)
            faultsArmed.append(fault)
        case .tooManyOpenFiles(let path, let at):
            files.arm(.tooManyOpenFiles, path: path, at: at.clampedNanoseconds)
            faultsArmed.append(fault)
        case .readError(let path, let at):
            files.arm(.readError, path: path, at: at.clampedNanoseconds)
            faultsArmed.append(fault)
        case .watchOverflow(let path, let at):
            files.arm(.watchOverflow, path: path, at: at.clampedNanoseconds)
            faultsArmed.append(fault)
        case .dnsFailure, .dropDatagram, .clockJump:
            injectNetworkFault(fault)
        case .process(let fault):
            try inject(fault)
        }
    }

    /// Every fault injected so far, by time: the resets armed (drawn from the seed or planned),
    /// the partitions (planned, injected or asked with `partition(_:_:for:)`), the file faults
    /// that struck and the child crashes armed. Given back as a plan with the same seed, it
    /// replays the run's faults.
    ///
    /// Thread rule: the driving thread.
    public var injectedFaults: [SimulationFault] {
        let resets = network.resetsArmed.map { SimulationFault.reset(connection: $0.connection, at: .nanoseconds(Int64(clamping: $0.at))) }
        return (faultsArmed + resets + drawnFileFaults + drawnNetworkFaults + processFaultsArmed).enumerated()
            .sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }
            .map(\.element)
    }
}

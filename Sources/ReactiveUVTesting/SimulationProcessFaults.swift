import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// A fault of a simulated child process, as a `SimulationFault.process` entry of a plan or of
/// `Simulation.injectedFaults`; written `.childCrash(child: 2, at: .milliseconds(40), signal: 11)`.
///
/// Thread rule: a value; safe from any thread.
public enum SimulationProcessFault: Sendable, Equatable, CustomStringConvertible {
    /// The child numbered `child` (from 1, in the order of the simulation's successful spawns)
    /// is killed by `signal` at `at`: its pipes close after what it wrote, and its parent sees
    /// `ProcessExit(status: 0, signal: signal)`. At once when it is spawned later than `at`;
    /// nothing when it ended first.
    case crash(child: Int, at: Duration, signal: Int32)

    /// When the fault strikes, from the start of the simulation.
    ///
    /// Thread rule: safe from any thread.
    public var time: Duration {
        switch self {
        case .crash(_, let at, _): at
        }
    }

    /// The fault as a plan entry: `.childCrash(child: 2, at: .milliseconds(40), signal: 11)`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .crash(let child, let at, let signal):
            ".childCrash(child: \(child), at: \(SimulationFault.swiftCode(at)), signal: \(signal))"
        }
    }

    /// What is wrong with this fault, or nil.
    var refusal: String? {
        switch self {
        case .crash(let child, let at, let signal):
            if child < 1 { return "a crash's child number starts at 1, got \(child)" }
            if at < .zero { return "a crash's time must not be negative, got \(at)" }
            if !(1...64).contains(signal) { return "a crash's signal must be in 1...64, got \(signal)" }
        }
        return nil
    }
}

extension SimulationFault {
    /// The child numbered `child` (from 1, in spawn order) is killed by `signal` at `at` (see
    /// `SimulationProcessFault.crash`): the spelling a plan and `description` use.
    ///
    /// Thread rule: safe from any thread.
    public static func childCrash(child: Int, at: Duration, signal: Int32) -> SimulationFault {
        .process(.crash(child: child, at: at, signal: signal))
    }
}

/// What a simulation does to the children its programs run, drawn from the seed: of a thousand
/// children, so many crash, each at a time drawn within `crashWithin` of its spawn and by one of
/// `crashSignals`. Each crash that is armed joins `Simulation.injectedFaults` as `.childCrash`.
///
/// Thread rule: a value; safe from any thread.
public struct SimulationProcessFaults: Sendable, Equatable {
    /// Children in a thousand killed at a drawn time, 0...1000 (default 0).
    public var crashPerMille: Int
    /// The window after a spawn in which a drawn crash falls (default 1 s).
    public var crashWithin: Duration
    /// The signals a crash kills with, one drawn per crash, each in 1...64 (default SIGSEGV and SIGKILL).
    public var crashSignals: [Int32]

    /// Faults as given; `Simulation.setProcessFaults(_:)` checks them.
    ///
    /// Thread rule: safe from any thread.
    public init(crashPerMille: Int = 0, crashWithin: Duration = .seconds(1), crashSignals: [Int32] = [11, 9]) {
        self.crashPerMille = crashPerMille
        self.crashWithin = crashWithin
        self.crashSignals = crashSignals
    }

    /// What is wrong with these faults, or nil.
    var refusal: String? {
        if !(0...1_000).contains(crashPerMille) { return "crashPerMille must be in 0...1000, got \(crashPerMille)" }
        if crashWithin < .zero { return "crashWithin must not be negative, got \(crashWithin)" }
        if crashSignals.isEmpty { return "crashSignals must name at least one signal" }
        if let bad = crashSignals.first(where: { !(1...64).contains($0) }) {
            return "crashSignals must be in 1...64, got \(bad)"
        }
        return nil
    }
}

extension Simulation {
    /// The crashes drawn from the seed for each child spawned from now on.
    ///
    /// Thread rule: the driving thread.
    public var processFaults: SimulationProcessFaults {
        let faults = system.crashFaults
        return SimulationProcessFaults(crashPerMille: faults.perMille, crashWithin: faults.within, crashSignals: faults.signals)
    }

    /// Sets the crashes drawn for the children spawned from now on. Under a fault plan they are
    /// drawn but not armed (the plan's crashes replace them).
    ///
    /// - Throws: `SimulationMisuse` naming the field that is out of range; nothing is changed.
    ///
    /// Thread rule: the driving thread.
    public func setProcessFaults(_ faults: SimulationProcessFaults) throws(SimulationMisuse) {
        if let refusal = faults.refusal { throw SimulationMisuse("setProcessFaults: \(refusal)") }
        var set = SimulatedSystem.CrashFaults()
        set.perMille = faults.crashPerMille
        set.within = faults.crashWithin
        set.signals = faults.crashSignals
        system.crashFaults = set
    }

    /// How many children the simulation's programs ran so far (spawns of unknown executables not counted).
    ///
    /// Thread rule: the driving thread.
    public var childrenSpawned: Int { system.childrenSpawned }

    /// Arms a planned process fault (see `inject(_:)`).
    func inject(_ fault: SimulationProcessFault) throws(SimulationMisuse) {
        if let refusal = fault.refusal { throw SimulationMisuse("inject: \(refusal) in \(fault)") }
        switch fault {
        case .crash(let child, let at, let signal):
            if child <= system.childrenSpawned {
                throw SimulationMisuse("inject: child \(child) was already spawned; plan its crash before it starts")
            }
            system.plannedCrashes[child] = (at.clampedNanoseconds, signal)
        }
    }

    /// The crashes armed so far (drawn or planned), as plan entries.
    var processFaultsArmed: [SimulationFault] {
        system.crashesArmed.map { .childCrash(child: $0.child, at: .nanoseconds(Int64(clamping: $0.at)), signal: $0.signal) }
    }
}

import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// What kind of callback a simulated loop ran.
///
/// Thread rule: a value; safe from any thread.
public enum SimulationCallbackKind: String, Sendable, Equatable {
    /// Work a loop queued for itself (`execute`, `schedule` from its own callbacks).
    case queuedWork = "queued work"
    /// Work queued from outside the loop: another loop, or the test's thread.
    case inboxWork = "work from outside"
    /// A job of a task that prefers the loop (`Task(executorPreference: loop)`).
    case taskJob = "task job"
    /// A job of an actor on the loop's serial executor.
    case actorJob = "actor job"
    /// A timer (`schedule(after:)`, a time operator, `Signal.timer`).
    case timer
    /// The loop's closing stages, after `shutdown()` was asked from a callback.
    case shutdown
    /// The test's own code, run as the loop's callback by `Simulation.perform(on:_:)`.
    case perform
    /// Not a callback: the virtual clock jumped forward (a `SimulationFault.clockJump`); the
    /// entry's time is the time it jumped from.
    case clockJump = "clock jump"
    /// The work of a `ThreadPool.run` job, run as a pool thread would (no loop current); the entry
    /// names the loop that queued it.
    case poolWork = "pool work"

    var code: UInt8 {
        switch self {
        case .queuedWork: 1
        case .inboxWork: 2
        case .taskJob: 3
        case .actorJob: 4
        case .timer: 5
        case .shutdown: 6
        case .perform: 7
        case .clockJump: 8
        case .poolWork: 9
        }
    }
}

/// One callback of a simulation: when (virtual time), on which loop, and what kind.
///
/// Thread rule: a value; safe from any thread.
public struct SimulationTraceEntry: Sendable, Equatable, CustomStringConvertible {
    /// The virtual time it ran at.
    public let time: SchedulerInstant
    /// The name of the loop it ran on.
    public let loopName: String
    /// The loop's place in the simulation (0 for `Simulation.loop`, then in order of `makeLoop`).
    public let loopIndex: Int
    /// What kind of callback it was.
    public let kind: SimulationCallbackKind
    /// A digest of what simulated streams read in this callback (the bytes, or how a stream
    /// ended), or nil when none read: equal runs read equal bytes.
    public let payload: UInt64?

    init(time: SchedulerInstant, loopName: String, loopIndex: Int, kind: SimulationCallbackKind, payload: UInt64? = nil) {
        self.time = time
        self.loopName = loopName
        self.loopIndex = loopIndex
        self.kind = kind
        self.payload = payload
    }

    /// `"1.500 ms  loop 'sim': timer"`, with `" read 0123456789abcdef"` when it read bytes.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        let micros = time.nanoseconds / 1_000
        let millis = "\(micros / 1_000).\(String(micros % 1_000 + 1_000).dropFirst())"
        let read = payload.map { " read " + String($0, radix: 16) } ?? ""
        return "\(millis) ms  loop '\(loopName)': \(kind.rawValue)\(read)"
    }
}

/// The callbacks of one simulation in the order they ran, and their running hash: the same seed
/// and program give the same hash, and any change of order, time or loop changes it.
///
/// Thread rule: a value; the simulation appends on its driving thread.
public struct SimulationTrace: Sendable {
    /// Every callback so far, in order (made from the compact records on each read: read it once).
    ///
    /// Thread rule: safe from any thread.
    public var entries: [SimulationTraceEntry] {
        records.map { record in
            SimulationTraceEntry(time: SchedulerInstant(nanoseconds: record.time), loopName: loopNames[Int(record.loopIndex)],
                                 loopIndex: Int(record.loopIndex), kind: record.kind,
                                 payload: record.hasPayload ? record.payload : nil)
        }
    }
    /// How many callbacks so far.
    ///
    /// Thread rule: safe from any thread.
    public var count: Int { records.count }
    /// One entry without its loop's name: a long run keeps millions of them.
    private struct Record {
        var time: UInt64
        var payload: UInt64
        var loopIndex: Int32
        var kind: SimulationCallbackKind
        var hasPayload: Bool
    }
    private var records: [Record] = []
    /// Each loop's name, by its index (a loop's name never changes).
    private var loopNames: [String] = []
    /// A running hash of each entry's virtual time, loop index, kind and payload digest.
    public private(set) var hash: UInt64 = 0xCBF2_9CE4_8422_2325

    /// The hash as 16 hexadecimal digits, as the check mode prints it.
    ///
    /// Thread rule: safe from any thread.
    public var hashHex: String {
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    mutating func append(_ entry: SimulationTraceEntry) {
        append(time: entry.time.nanoseconds, loopIndex: entry.loopIndex, kind: entry.kind, payload: entry.payload) { entry.loopName }
    }

    /// `append(_:)` without making an entry (the driver's, once per callback): the loop's name is
    /// asked for only the first time its index is seen.
    mutating func append(time: UInt64, loopIndex: Int, kind: SimulationCallbackKind, payload: UInt64?, loopName: () -> String) {
        let index = Int32(truncatingIfNeeded: loopIndex)
        if Int(index) >= loopNames.count { loopNames += Array(repeating: "", count: Int(index) + 1 - loopNames.count) }
        if loopNames[Int(index)].isEmpty { loopNames[Int(index)] = loopName() }
        records.append(Record(time: time, payload: payload ?? 0, loopIndex: index, kind: kind, hasPayload: payload != nil))
        hash = Self.mix(hash, time)
        hash = Self.mix(hash, UInt64(UInt32(bitPattern: index)) << 8 | UInt64(kind.code))
        if let payload { hash = Self.mix(hash, payload) }
    }

    /// `digest` continued over `bytes` (eight at a time), their count and `status` (start from `payloadSeed`).
    static func digest(_ bytes: UnsafeRawBufferPointer, status: Int32, into digest: UInt64) -> UInt64 {
        var hash = digest
        var offset = 0
        while offset + 8 <= bytes.count {
            hash = mix(hash, bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian)
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            tail |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        hash = mix(hash, tail)
        return mix(hash, UInt64(bytes.count) << 32 | UInt64(UInt32(bitPattern: status)))
    }

    /// Where a callback's payload digest starts.
    static let payloadSeed: UInt64 = 0xCBF2_9CE4_8422_2325

    /// One word into a running hash: a multiply and an xor-shift (a word at a time, not a byte).
    @inline(__always)
    private static func mix(_ hash: UInt64, _ value: UInt64) -> UInt64 {
        let product = (hash ^ value) &* 0x9E37_79B9_7F4A_7C15
        return product ^ (product >> 29)
    }
}

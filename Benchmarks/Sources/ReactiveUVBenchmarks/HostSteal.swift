import Foundation

/// CPU time the hypervisor gave to others while this machine's CPUs were ready to run: "steal",
/// the eighth figure of `/proc/stat`'s `cpu` line, in clock ticks summed over the CPUs.
///
/// On a virtual machine whose host is busy, steal comes in bursts of seconds, and a run that meets
/// one measures the host rather than the contender. So the stat scenario runs a contender again
/// when the host stole more than `limit` of the machine during its run, and prints what it stole
/// and how often it ran again, for every contender alike.
enum HostSteal {
    /// Clock ticks of steal since boot, or nil where `/proc/stat` has no such figure.
    static func ticks() -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first, line.hasPrefix("cpu ") else { return nil }
        let fields = line.split(separator: " ")
        // "cpu user nice system idle iowait irq softirq steal ...": steal is the eighth number.
        guard fields.count > 8 else { return nil }
        return UInt64(fields[8])
    }

    /// The machine's CPU time over `elapsedNanoseconds`, in clock ticks (every CPU).
    static func availableTicks(_ elapsedNanoseconds: UInt64) -> Double {
        Double(elapsedNanoseconds) / 1e9 * Double(sysconf(Int32(_SC_CLK_TCK))) * Double(ProcessInfo.processInfo.activeProcessorCount)
    }

    /// What `leastStolen` ran: the attempt kept, the share the host stole during it, and how many
    /// attempts were made.
    struct Outcome<Result> {
        let result: Result
        let stolen: Double
        let attempts: Int
    }

    /// Runs `body` until the host stole at most `limit` of the machine's CPU time during it, at most
    /// `attempts` times, 200 ms apart; keeps the attempt with the least steal. Without `/proc/stat`,
    /// or for a run shorter than `1 / limit` clock ticks of the machine, it runs once.
    static func leastStolen<Result>(limit: Double = 0.03, attempts: Int = 4, _ body: () -> Result) -> Outcome<Result> {
        var best: (result: Result, stolen: Double)?
        var made = 0
        for attempt in 1...max(1, attempts) {
            made = attempt
            if attempt > 1 { usleep(200_000) }
            let before = ticks()
            let start = DispatchTime.now().uptimeNanoseconds
            let result = body()
            let elapsed = DispatchTime.now().uptimeNanoseconds - start
            guard let before, let after = ticks() else { return Outcome(result: result, stolen: 0, attempts: attempt) }
            // The share of the machine's CPU time (every CPU) the host stole during the run, 0 to 1.
            let available = availableTicks(elapsed)
            let stolen = available > 0 ? min(1, Double(after &- before) / available) : 0
            if best == nil || stolen < best!.stolen { best = (result, stolen) }
            // A run too short for one tick to be under `limit` (a `--scale` run) cannot be judged: kept.
            if stolen <= limit || available * limit < 1 { break }
        }
        return Outcome(result: best!.result, stolen: best!.stolen, attempts: made)
    }
}

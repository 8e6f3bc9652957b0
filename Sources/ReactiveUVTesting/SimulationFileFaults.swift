import ReactiveUV

/// What a simulation's file system does to the `Files` calls of its loops, drawn from the seed:
/// of a thousand calls of each kind, so many fail once with the error a real system gives.
///
/// Thread rule: a value; safe from any thread.
public struct SimulationFileFaults: Sendable, Equatable {
    /// Writes in a thousand that fail with `ENOSPC`, 0...1000 (default 0).
    public var noSpacePerMille: Int
    /// Opens (of a whole-file read or write, `Files.open`) in a thousand that fail with `EMFILE`, 0...1000 (default 0).
    public var tooManyOpenFilesPerMille: Int
    /// Reads in a thousand that fail with `EIO`, 0...1000 (default 0).
    public var readErrorPerMille: Int
    /// Watch events in a thousand lost to an overflow of the kernel's queue (`.eventsLost` sent in their
    /// place), 0...1000 (default 0).
    public var watchOverflowPerMille: Int

    /// Faults as given; `Simulation.setFileFaults(_:)` checks them.
    ///
    /// Thread rule: safe from any thread.
    public init(noSpacePerMille: Int = 0, tooManyOpenFilesPerMille: Int = 0, readErrorPerMille: Int = 0,
                watchOverflowPerMille: Int = 0) {
        self.noSpacePerMille = noSpacePerMille
        self.tooManyOpenFilesPerMille = tooManyOpenFilesPerMille
        self.readErrorPerMille = readErrorPerMille
        self.watchOverflowPerMille = watchOverflowPerMille
    }

    /// What is wrong with these faults, or nil.
    var refusal: String? {
        for (name, value) in [("noSpacePerMille", noSpacePerMille), ("tooManyOpenFilesPerMille", tooManyOpenFilesPerMille),
                              ("readErrorPerMille", readErrorPerMille),
                              ("watchOverflowPerMille", watchOverflowPerMille)] where !(0...1_000).contains(value) {
            return "\(name) must be in 0...1000, got \(value)"
        }
        return nil
    }
}

extension Simulation {
    /// Sets the file faults drawn from the seed from now on. Each that strikes joins
    /// `injectedFaults` as a planned fault of its path and time.
    ///
    /// - Throws: `SimulationMisuse` naming a field outside 0...1000; nothing is changed.
    ///
    /// Thread rule: the driving thread.
    public func setFileFaults(_ faults: SimulationFileFaults) throws(SimulationMisuse) {
        if let refusal = faults.refusal { throw SimulationMisuse("setFileFaults: \(refusal)") }
        files.drawnPerMille = [.noSpace: faults.noSpacePerMille, .tooManyOpenFiles: faults.tooManyOpenFilesPerMille,
                               .readError: faults.readErrorPerMille, .watchOverflow: faults.watchOverflowPerMille]
    }

    /// The file faults drawn from the seed that struck, as plan entries.
    var drawnFileFaults: [SimulationFault] {
        files.drawnStruck.map { struck in
            let at = Duration.nanoseconds(Int64(clamping: struck.at))
            return switch struck.kind {
            case .noSpace: SimulationFault.noSpace(path: struck.path, at: at)
            case .tooManyOpenFiles: SimulationFault.tooManyOpenFiles(path: struck.path, at: at)
            case .readError: SimulationFault.readError(path: struck.path, at: at)
            case .watchOverflow: SimulationFault.watchOverflow(path: struck.path, at: at)
            }
        }
    }
}

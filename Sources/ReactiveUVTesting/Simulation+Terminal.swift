import ReactiveUV
@_spi(SchedulerImplementation) import ReactiveUVCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Simulation {
    /// Puts the simulated process's standard input, output and error on a terminal of `size`:
    /// `TTY.isTerminal`, `TTY.windowSize` and `TTY.setMode` called in the simulation's callbacks
    /// see it. Without it the process has none, as under pipes (`ENOTTY`). Attaching again
    /// replaces the terminal (its mode back to `.normal`).
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public func attachTerminal(size: WindowSize = WindowSize(columns: 80, rows: 24)) {
        system.terminal = SimulatedTerminal(size: size)
    }

    /// The mode the program last set on the simulated terminal (`TTY.setMode`); nil without a terminal.
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public var terminalMode: TTY.Mode? { system.terminal?.mode }

    /// The simulated terminal's size now; nil without a terminal.
    ///
    /// Thread rule: the driving thread (or a callback of the simulation's loops).
    public var terminalSize: WindowSize? { system.terminal?.size }

    /// Resizes the simulated terminal to `size` at `time` (virtual, from the start of the
    /// simulation; a time passed counts as now) and sends `SIGWINCH`, as a terminal does when its
    /// window changes: `TTY.resizes` delivers the new size. A callback of `loop`, in the trace.
    ///
    /// - Throws: `SimulationMisuse` without a terminal (`attachTerminal`), for a size below 1×1
    ///   or a negative time; nothing changes.
    ///
    /// Thread rule: the driving thread, or a callback of the simulation's loops.
    public func resizeTerminal(to size: WindowSize, at time: Duration) throws(SimulationMisuse) {
        guard let terminal = system.terminal else {
            throw SimulationMisuse("resizeTerminal(to:at:): the simulated process has no terminal (attachTerminal first)")
        }
        if size.columns < 1 || size.rows < 1 {
            throw SimulationMisuse("resizeTerminal(to:at:): a terminal has at least 1 column and 1 row, got \(size)")
        }
        if time < .zero { throw SimulationMisuse("resizeTerminal(to:at:): the time must not be negative, got \(time)") }
        try arm(at: time, what: "resizeTerminal(to:at:)") { [system] loop in
            terminal.size = size
            system.raise(SIGWINCH, from: loop)
        }
    }
}

internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A terminal's size in character cells.
///
/// Thread rule: a value type; safe from any thread.
public struct WindowSize: Sendable, Hashable, CustomStringConvertible {
    /// Columns (characters per line).
    public var columns: Int
    /// Rows (lines).
    public var rows: Int

    /// Creates a size.
    ///
    /// Thread rule: safe from any thread.
    public init(columns: Int, rows: Int) {
        self.columns = columns
        self.rows = rows
    }

    /// `"80x24"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { "\(columns)x\(rows)" }
}

/// Terminals: their mode (line editing or raw keys), their size, and a signal of resizes. Reading
/// and writing go through `StandardIO`; functions take a descriptor (default 0 or 1).
///
/// `setMode(.raw)` saves the settings the first time and turns off line editing, echo and signal
/// keys (Ctrl-C arrives as byte 3). The saved settings come back with `setMode(.normal)`, and,
/// so a program ending in raw mode does not leave the shell without echo:
/// - at exit (`atexit`);
/// - on `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` left at their default action: the handler
///   restores, then lets the signal terminate the process. A signal the program watches
///   (`Signal.unixSignals`) is left to it while watched;
/// - by `resetMode()`, async-signal-safe, for a crash handler of your own.
/// `SIGKILL` or a trap with no handler cannot be caught: `stty sane` repairs the terminal.
///
/// Settings are kept on the descriptor itself, not a libuv TTY handle, whose reset goes to a
/// descriptor it closed with the handle.
///
/// Called in a `Simulation`'s callbacks, `isTerminal`, `windowSize`, `setMode` and `resizes` act on
/// the simulated process's terminal (`Simulation.attachTerminal`; none by default: `ENOTTY`);
/// `resetMode` acts on the real terminal only.
///
/// Thread rule: safe from any thread.
public enum TTY {
    /// A terminal mode.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Mode: Sendable, Hashable {
        /// The settings the terminal had before the first `setMode(.raw)`: line editing, echo, Ctrl-C as `SIGINT`.
        case normal
        /// Keys as typed, one byte at a time: no line editing, echo or signal keys, 8-bit input; output still turns `\n` into `\r\n`.
        case raw
    }

    /// Whether `descriptor` (default standard input) is a terminal.
    ///
    /// Thread rule: safe from any thread.
    public static func isTerminal(_ descriptor: Int32 = 0) -> Bool {
        if let system = simulatedSystem { return system.terminal != nil && (0...2).contains(descriptor) }
        return isatty(descriptor) == 1
    }

    /// The terminal's size (`TIOCGWINSZ`).
    ///
    /// - Parameter descriptor: The terminal (default standard output).
    /// - Throws: `UVError`: `ENOTTY` when `descriptor` is not a terminal, `EBADF` when it is not open.
    ///
    /// Thread rule: safe from any thread.
    public static func windowSize(of descriptor: Int32 = 1) throws(UVError) -> WindowSize {
        if let system = simulatedSystem { return try simulatedTerminal(system, of: descriptor, call: "window size").size }
        var size = winsize()
        guard ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0 else {
            throw UVError(code: -errno, context: "window size of descriptor \(descriptor)")
        }
        return WindowSize(columns: Int(size.ws_col), rows: Int(size.ws_row))
    }

    /// The terminal's size each time it changes (`SIGWINCH`); not the current size on subscription.
    /// Fails with `ENOTTY` if `descriptor` is not a terminal when a resize arrives.
    ///
    /// - Parameters:
    ///   - descriptor: The terminal (default standard output).
    ///   - loop: The loop whose thread watches; nil for the subscription's home loop.
    ///
    /// Thread rule: safe from any thread.
    public static func resizes(of descriptor: Int32 = 1, on loop: EventLoop? = nil) -> Signal<WindowSize> {
        Signal<Int32>.unixSignals([SIGWINCH], on: loop)
            .tryMap { _ in try windowSize(of: descriptor) }
            .debugNamed("+TTY.resizes(\(descriptor))")
    }

    /// Puts the terminal `descriptor` (default standard input) in `mode`, after the output written
    /// so far has gone out.
    ///
    /// The first change to `.raw` saves the settings that `.normal`, exit and the terminating signals
    /// restore. Setting the current mode again is harmless.
    ///
    /// - Throws: `UVError`: `ENOTTY` when not a terminal, `EBADF` when not open, `EBUSY` when another
    ///   descriptor's terminal is in raw mode (set it back to `.normal` first).
    ///
    /// Thread rule: safe from any thread (calls are serialized by a lock).
    public static func setMode(_ mode: Mode, of descriptor: Int32 = 0) throws(UVError) {
        if let system = simulatedSystem {
            return try simulatedTerminal(system, of: descriptor, call: "TTY.setMode(.\(mode))").setMode(mode, of: descriptor)
        }
        try TerminalSettings.setMode(mode, of: descriptor)
    }

    /// Puts back the settings saved by the first `setMode(.raw)` if the terminal is in raw mode.
    ///
    /// Async-signal-safe: call it from a signal or crash handler. It keeps the saved settings, so a
    /// second call is harmless.
    ///
    /// Thread rule: safe from any thread and from signal handlers.
    public static func resetMode() {
        TerminalSettings.restoreSaved()
    }
}

/// The saved terminal settings and the hooks that restore them. A signal handler reads `saved`
/// and `savedDescriptor`, so they are memory allocated once and an atomic; writers hold `lock`.
enum TerminalSettings {
    /// The settings before raw mode; meaningful while `savedDescriptor` >= 0.
    // Written only under `lock` while `savedDescriptor` is -1; read after an acquiring load.
    nonisolated(unsafe) static let saved = UnsafeMutablePointer<termios>.allocate(capacity: 1)
    /// The descriptor whose settings `saved` holds, or -1 when no terminal is in raw mode.
    static let savedDescriptor = Atomic<Int32>(-1)
    /// Whether the restoring handler is wanted on the terminating signals (set by the first raw mode).
    static let restoresOnSignals = Atomic<Bool>(false)
    /// The signals whose default action terminates the process and that the handler covers.
    static let terminatingSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    private static let lock = LockedValue<Bool>(false)  // whether the exit and signal hooks are installed

    static func setMode(_ mode: TTY.Mode, of descriptor: Int32) throws(UVError) {
        let result: UVError? = lock.withLock { hooksInstalled in
            let current = savedDescriptor.load(ordering: .acquiring)
            switch mode {
            case .normal:
                guard current >= 0 else {
                    // Never made raw here: nothing to restore, but say so if it is not a terminal at all.
                    var settings = termios()
                    return tcgetattr(descriptor, &settings) == 0 ? nil : UVError(code: -errno, context: "TTY.setMode(.normal) of descriptor \(descriptor)")
                }
                guard current == descriptor else {
                    return UVError(code: UV_EBUSY.rawValue, message: "the terminal in raw mode is descriptor \(current), not \(descriptor)",
                                   context: "TTY.setMode(.normal)")
                }
                if tcsetattr(descriptor, TCSADRAIN, saved) != 0 {
                    return UVError(code: -errno, context: "TTY.setMode(.normal) of descriptor \(descriptor)")
                }
                savedDescriptor.store(-1, ordering: .releasing)
                return nil
            case .raw:
                if current >= 0 && current != descriptor {
                    return UVError(code: UV_EBUSY.rawValue, message: "descriptor \(current)'s terminal is already in raw mode: set it back to .normal first",
                                   context: "TTY.setMode(.raw) of descriptor \(descriptor)")
                }
                var settings = termios()
                guard tcgetattr(descriptor, &settings) == 0 else {
                    return UVError(code: -errno, context: "TTY.setMode(.raw) of descriptor \(descriptor)")
                }
                if current < 0 {
                    saved.pointee = settings
                    savedDescriptor.store(descriptor, ordering: .releasing)
                    if !hooksInstalled {
                        hooksInstalled = true
                        installHooks()
                    }
                }
                makeRaw(&settings)
                if tcsetattr(descriptor, TCSADRAIN, &settings) != 0 {
                    let error = UVError(code: -errno, context: "TTY.setMode(.raw) of descriptor \(descriptor)")
                    if current < 0 { savedDescriptor.store(-1, ordering: .releasing) }
                    return error
                }
                return nil
            }
        }
        if let result { throw result }
    }

    /// libuv's `UV_TTY_MODE_RAW`: no line editing, echo or signal keys; 8-bit bytes, one at a time.
    private static func makeRaw(_ settings: inout termios) {
        settings.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON)
        settings.c_oflag |= tcflag_t(ONLCR)
        settings.c_cflag |= tcflag_t(CS8)
        settings.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG)
        withUnsafeMutableBytes(of: &settings.c_cc) { characters in
            characters[Int(VMIN)] = 1
            characters[Int(VTIME)] = 0
        }
    }

    /// Puts the saved settings back (async-signal-safe).
    static func restoreSaved() {
        let descriptor = savedDescriptor.load(ordering: .acquiring)
        guard descriptor >= 0 else { return }
        _ = tcsetattr(descriptor, TCSANOW, saved)
    }

    /// `atexit`, and a handler for each terminating signal still at its default action.
    private static func installHooks() {
        _ = saved  // initialized before any handler can read it
        atexit { TerminalSettings.restoreSaved() }
        restoresOnSignals.store(true, ordering: .releasing)
        for number in terminatingSignals {
            SignalActions.lock.withLock { _ in installRestorerIfDefault(number) }
        }
    }

    /// After a libuv watch of `number` stopped (`SignalActions.lock` held): puts the restoring
    /// handler back if the watch left the default action.
    static func reinstallRestorer(for number: Int32) {
        guard restoresOnSignals.load(ordering: .acquiring), terminatingSignals.contains(number) else { return }
        installRestorerIfDefault(number)
    }

    /// Installs the restoring handler for `number` if its action is the default (`SignalActions.lock` held).
    private static func installRestorerIfDefault(_ number: Int32) {
        var current = sigaction()
        guard sigaction(number, nil, &current) == 0, current.__sigaction_handler.sa_handler == nil else { return }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = terminalRestoringSignalHandler
        sigemptyset(&action.sa_mask)
        action.sa_flags = Int32(truncatingIfNeeded: SA_RESETHAND)  // 0x80000000: the sign bit. The next delivery (our re-raise) takes the default action
        _ = sigaction(number, &action, nil)
    }
}

/// Restores the terminal, then terminates the process with the signal as its default action would.
private let terminalRestoringSignalHandler: @convention(c) (Int32) -> Void = { number in
    TerminalSettings.restoreSaved()
    raise(number)  // SA_RESETHAND put the default action back
}

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
    /// - Parameters:
    ///   - columns: Columns.
    ///   - rows: Rows.
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

/// Terminals: their mode (line editing or raw keys), their size, and a signal of resizes.
///
/// Reading and writing a terminal goes through `StandardIO` (a terminal on
/// standard input or output is a libuv TTY stream there); this type changes
/// how the terminal behaves. The functions take a descriptor so that any
/// terminal can be used; standard input (0) and standard output (1) are the defaults.
///
/// Mode and restoring it: `setMode(.raw)` saves the terminal's settings the
/// first time and switches off line editing, echo and the keys that send
/// signals (Ctrl-C then arrives as the byte 3, Ctrl-D as 4, and the program
/// decides what they mean), with libuv's `UV_TTY_MODE_RAW` flags.
/// `setMode(.normal)` puts the saved settings back. So that a program that
/// ends in raw mode does not leave the user's shell without echo, the saved
/// settings are also put back:
/// - at exit (`exit()` or returning from `main`, through `atexit`);
/// - on `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` whose action was the
///   default (terminate): the handler puts the settings back, then lets the
///   signal terminate the process as before. A signal the program watches
///   itself (`Signal.unixSignals`) is left to it while it watches: restore the
///   mode there, or let the program's exit do it. When its last watch ends
///   (libuv then puts the default action back), the handler is installed
///   again, in whichever order the watches and the raw mode came;
/// - by `resetMode()`, which is async-signal-safe: call it from a crash
///   handler of your own (as libuv's `uv_tty_reset_mode`).
/// A crash that kills the process outright (`SIGKILL`, a trap with no handler)
/// cannot be caught; `stty sane` repairs the terminal then.
///
/// The settings are saved and restored on the descriptor itself, not through
/// a libuv TTY handle: libuv keeps its saved settings on the descriptor of the
/// handle that changed the mode, which it reopens and closes with the handle,
/// so its reset would go to a closed descriptor once that handle is gone.
///
/// Thread rule: safe from any thread.
public enum TTY {
    /// A terminal mode.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Mode: Sendable, Hashable {
        /// The settings the terminal had before the first `setMode(.raw)`: line editing, echo, Ctrl-C as `SIGINT`.
        case normal
        /// Keys as they are typed, one byte at a time: no line editing, no echo, no signal keys, 8-bit input; output still turns `\n` into `\r\n`.
        case raw
    }

    /// Whether `descriptor` is a terminal (`isatty`).
    ///
    /// - Parameter descriptor: The descriptor (default standard input).
    /// - Returns: True for a terminal.
    ///
    /// Thread rule: safe from any thread.
    public static func isTerminal(_ descriptor: Int32 = 0) -> Bool {
        isatty(descriptor) == 1
    }

    /// The terminal's size (`TIOCGWINSZ`).
    ///
    /// - Parameter descriptor: The terminal (default standard output).
    /// - Returns: Its size.
    /// - Throws: `UVError`: `ENOTTY` when `descriptor` is not a terminal, `EBADF` when it is not open.
    ///
    /// Thread rule: safe from any thread.
    public static func windowSize(of descriptor: Int32 = 1) throws(UVError) -> WindowSize {
        var size = winsize()
        guard ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0 else {
            throw UVError(code: -errno, context: "window size of descriptor \(descriptor)")
        }
        return WindowSize(columns: Int(size.ws_col), rows: Int(size.ws_row))
    }

    /// The terminal's size each time it changes (`SIGWINCH`), read when the signal arrives.
    ///
    /// Watching uses a libuv signal handle on `loop`; disposing closes it.
    /// The current size is not sent on subscription (read `windowSize(of:)`
    /// for it). Fails with `ENOTTY` if `descriptor` is not a terminal when a
    /// resize arrives.
    ///
    /// - Parameters:
    ///   - descriptor: The terminal (default standard output).
    ///   - loop: The loop whose thread watches; nil for the subscription's home loop.
    /// - Returns: A signal of sizes.
    ///
    /// Thread rule: safe from any thread.
    public static func resizes(of descriptor: Int32 = 1, on loop: EventLoop? = nil) -> Signal<WindowSize> {
        Signal<Int32>.unixSignals([SIGWINCH], on: loop)
            .tryMap { _ in try windowSize(of: descriptor) }
            .debugNamed("+TTY.resizes(\(descriptor))")
    }

    /// Puts the terminal in `mode` (`tcsetattr`, after the output written so far has gone out).
    ///
    /// The first change to `.raw` saves the settings that `.normal`, exit and
    /// the terminating signals restore (see `TTY`). Setting the mode it is
    /// already in does nothing harmful.
    ///
    /// - Parameters:
    ///   - mode: The mode.
    ///   - descriptor: The terminal (default standard input).
    /// - Throws: `UVError`: `ENOTTY` when `descriptor` is not a terminal, `EBADF`
    ///   when it is not open, `EBUSY` when another descriptor's terminal is in raw
    ///   mode (one terminal at a time: set it back to `.normal` first).
    ///
    /// Thread rule: safe from any thread (calls are serialized by a lock).
    public static func setMode(_ mode: Mode, of descriptor: Int32 = 0) throws(UVError) {
        try TerminalSettings.setMode(mode, of: descriptor)
    }

    /// Puts back the settings saved by the first `setMode(.raw)`, if the terminal is in raw mode; otherwise does nothing.
    ///
    /// Async-signal-safe (one atomic load and one `tcsetattr`): call it from a
    /// signal or crash handler. It does not forget the saved settings, so
    /// calling it twice is harmless; `setMode(.normal)` is the ordinary way back.
    ///
    /// Thread rule: safe from any thread and from signal handlers.
    public static func resetMode() {
        TerminalSettings.restoreSaved()
    }
}

/// The saved terminal settings and the hooks that restore them.
///
/// `saved` and `savedDescriptor` are read by a signal handler, so they are
/// plain memory allocated once and an atomic: the handler takes no lock and
/// allocates nothing. Writers hold `lock`.
enum TerminalSettings {
    /// The settings before raw mode; meaningful while `savedDescriptor` >= 0.
    // Written only under `lock` while `savedDescriptor` is -1; read by the restorers after an acquiring load.
    nonisolated(unsafe) static let saved = UnsafeMutablePointer<termios>.allocate(capacity: 1)
    /// The descriptor whose settings `saved` holds, or -1 when no terminal is in raw mode.
    static let savedDescriptor = Atomic<Int32>(-1)
    /// Whether the restoring handler is wanted on the terminating signals (set once, by the first raw mode).
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
    /// handler back if the watch left the default action and the handler is wanted.
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

internal import CLibUV

/// The terminal a simulated process's standard input, output and error are on (`Simulation.attachTerminal`):
/// its size and mode, which `TTY` reads and sets when called in one of the simulation's callbacks.
///
/// Thread rule: the simulation's driving thread.
package final class SimulatedTerminal: @unchecked Sendable {
    // Sendable: touched only on the simulation's driving thread (the thread rule).

    /// The size `TTY.windowSize` gives.
    package var size: WindowSize
    /// The mode the program set last.
    package private(set) var mode: TTY.Mode = .normal
    /// The descriptor put in raw mode, while one is.
    private var rawDescriptor: Int32?

    package init(size: WindowSize) {
        self.size = size
    }

    /// `TTY.setMode` on this terminal: the real call's rules (one descriptor in raw mode at a time).
    func setMode(_ mode: TTY.Mode, of descriptor: Int32) throws(UVError) {
        if let rawDescriptor, rawDescriptor != descriptor {
            throw UVError(code: UV_EBUSY.rawValue, message: "descriptor \(rawDescriptor)'s terminal is in raw mode: set it back to .normal first",
                          context: "TTY.setMode(.\(mode)) of descriptor \(descriptor) (simulated)")
        }
        rawDescriptor = mode == .raw ? descriptor : nil
        self.mode = mode
    }
}

extension TTY {
    /// The simulated system of the loop whose callback runs now; nil on a real loop or off any loop.
    static var simulatedSystem: SimulatedSystem? {
        EventLoop.current?.simulatedSystem
    }

    /// The simulated terminal `descriptor` is on, or the error a real process without one would get:
    /// `ENOTTY` for standard input, output or error when no terminal is attached, `EBADF` for any
    /// other descriptor (the simulated process opens none).
    static func simulatedTerminal(_ system: SimulatedSystem, of descriptor: Int32, call: String) throws(UVError) -> SimulatedTerminal {
        guard (0...2).contains(descriptor) else {
            throw UVError(code: UV_EBADF.rawValue, message: "descriptor \(descriptor) is not open in the simulated process",
                          context: "\(call) of descriptor \(descriptor)")
        }
        guard let terminal = system.terminal else {
            throw UVError(code: -ENOTTY, message: "the simulated process has no terminal (Simulation.attachTerminal)",
                          context: "\(call) of descriptor \(descriptor)")
        }
        return terminal
    }
}

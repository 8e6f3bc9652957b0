internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `Signal.unixSignals` on a simulated loop: one subscription's watch of signal numbers, told of
/// each signal the test sends to the simulated process (`SimulatedSystem.raise`) as a callback of
/// its loop. Every watch of a number gets it, as every libuv watch in a process does. Listed with
/// the loop like a libuv handle (the leak check sees a watch left open); closes as a callback.
///
/// Thread rule: loop thread only (the simulation's driving thread), except `dispose()` and `disposedFlag`.
final class SimulatedSignalWatch: SubscriberHandle<Int32>, @unchecked Sendable {
    // Sendable: every stored var is touched on the loop thread only (dispose() hops there).
    let numbers: Set<Int32>
    private let described: String
    private let system: SimulatedSystem

    private init(loop: EventLoop, numbers: [Int32], system: SimulatedSystem, subscriber: Subscriber<Int32>) {
        self.numbers = Set(numbers)
        described = "\(numbers)"
        self.system = system
        super.init(loop: loop, byteCount: uv_handle_size(UV_SIGNAL), subscriber: subscriber)
    }

    override var label: String { "signals \(described) from Signal.unixSignals (simulated)" }

    /// Whether a program may watch `number`: 1...64, not SIGKILL or SIGSTOP (`sigaction` refuses those).
    static func catchable(_ number: Int32) -> Bool {
        (1...64).contains(number) && number != SIGKILL && number != SIGSTOP
    }

    /// Whether a process nobody set a handler in survives `number` (its default action ignores
    /// it; the stops count too, as the simulation stops nothing).
    static func ignoredByDefault(_ number: Int32) -> Bool {
        [SIGCHLD, SIGURG, SIGWINCH, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU].contains(number)
    }

    /// Watches `numbers` for `subscriber`, or fails it with `EINVAL` (a number libuv would refuse).
    static func open(_ numbers: [Int32], system: SimulatedSystem, loop: EventLoop,
                     subscriber: Subscriber<Int32>) -> (any Disposable)? {
        if let bad = numbers.first(where: { !catchable($0) }) {
            subscriber.sendError(UVError(code: UVError.invalidArgumentCode,
                                         message: "signal \(bad) cannot be watched (1...64, not SIGKILL or SIGSTOP)",
                                         context: "uv_signal_start(\(bad)) (simulated)"))
            return nil
        }
        let watch = SimulatedSignalWatch(loop: loop, numbers: numbers, system: system, subscriber: subscriber)
        watch.didOpenSimulated(as: UV_SIGNAL)
        system.signalWatches.append(watch)
        return watch
    }

    /// The signal arrived: sent to the subscriber now (a callback of this loop).
    func deliver(_ number: Int32) {
        guard isHandleOpen else { return }
        subscriber?.sendNext(number)
    }

    override func close() {
        system.signalWatches.removeAll { $0 === self }
        closeSimulatedHandle()
    }
}

extension SimulatedSystem {
    /// Sends `number` to the simulated process now, from a callback of `loop`: every watch of it
    /// gets it (on its own loop: now on `loop`, else as that loop's next work from outside). With
    /// none, a signal whose default action kills becomes a problem of the run (a real process
    /// would have died), one ignored by default is dropped as a real process drops it.
    package func raise(_ number: Int32, from loop: EventLoop) {
        noteInTrace(withUnsafeBytes(of: number.littleEndian) { Array($0) }, status: -number)
        let watches = signalWatches.filter { $0.numbers.contains(number) }
        if watches.isEmpty {
            if !SimulatedSignalWatch.ignoredByDefault(number) {
                problems.append("signal \(number) sent at \(now) ns found no Signal.unixSignals watching it: "
                                + "a real process would have been killed by it")
            }
            return
        }
        for watch in watches {
            if watch.loop === loop {
                watch.deliver(number)
            } else {
                let box = UncheckedSendable(watch)
                watch.loop.execute { box.value.deliver(number) }
            }
        }
    }
}

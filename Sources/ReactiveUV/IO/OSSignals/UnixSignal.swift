internal import CLibUV
import Synchronization

extension Signal where Value == Int32 {
    /// Sends the signal number each time the process receives one of `numbers` (SIGINT, SIGTERM, SIGHUP, ...).
    ///
    /// While subscribed, the delivery replaces the default action. When the last watch of a number
    /// ends, libuv puts the default back (or, after `TTY.setMode(.raw)`, the terminal restorer for
    /// the terminating signals). An invalid number fails with `UVError` (`EINVAL`). On a simulated
    /// loop it sends the signals the test sends (`Simulation.send(signal:at:)`).
    ///
    /// - Parameters:
    ///   - numbers: Signal numbers, e.g. `[SIGINT, SIGTERM]`.
    ///   - loop: The loop whose thread watches; nil for the subscription's home loop.
    ///
    /// Thread rule: safe from any thread.
    public static func unixSignals(_ numbers: [Int32], on loop: EventLoop? = nil) -> Signal<Int32> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "Signal.unixSignals") { loop in
                if let system = loop.simulatedSystem {
                    return SimulatedSignalWatch.open(numbers, system: system, loop: loop, subscriber: subscriber)
                }
                let handles = CompoundDisposable()
                return LoopBinding.started(handles, for: subscriber) {
                    for number in numbers {
                        let handle = UnixSignalHandle(loop: loop, subscriber: subscriber)
                        handles.add(handle)
                        try handle.start(number)
                    }
                }
            }
        }.debugNamed("+unixSignals(\(numbers))")
    }
}

/// One `uv_signal_t` feeding a subscriber: the OS-signal family's backend seam.
/// Thread rule: loop thread only, except `init` and `dispose()`.
final class UnixSignalHandle: SubscriberHandle<Int32>, @unchecked Sendable {
    // Sendable: `number` is loop thread only, like the rest of the handle (see `SubscriberHandle`).
    private var number: Int32 = 0

    init(loop: EventLoop, subscriber: Subscriber<Int32>) {
        super.init(loop: loop, byteCount: uv_handle_size(UV_SIGNAL), subscriber: subscriber)
    }

    override var label: String { "signal \(number) from Signal.unixSignals" }

    func start(_ number: Int32) throws(UVError) {
        self.number = number
        let handle = pointer(as: uv_signal_t.self)
        try uvCheck(uv_signal_init(loop.uvLoop, handle), "uv_signal_init")
        didOpen()
        let result = SignalActions.lock.withLock { _ in uv_signal_start(handle, unixSignalCallback, number) }
        do {
            try uvCheck(result, "uv_signal_start(\(number))")
        } catch {
            closeHandle()
            throw error
        }
    }

    override func willClose() {
        // The last watch leaves SIG_DFL behind: the terminal restorer goes back in the same critical
        // section, before another watch can start.
        let handle = pointer(as: uv_signal_t.self)
        let number = self.number
        SignalActions.lock.withLock { _ in
            uv_signal_stop(handle)
            TerminalSettings.reinstallRestorer(for: number)
        }
        super.willClose()
    }

    fileprivate func deliver(_ number: Int32) {
        subscriber?.sendNext(number)
    }
}

private let unixSignalCallback: uv_signal_cb = { handle, number in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<UnixSignalHandle>.fromOpaque(data).takeUnretainedValue().deliver(number)
}

/// Orders this process's changes to signal actions (libuv's watches and the terminal restorer),
/// so a check of the current action and the change after it are never split. Nothing calls back
/// into ReactiveUV while it is held.
/// Thread rule: safe from any thread.
enum SignalActions {
    static let lock = Mutex(())
}

import Logging
import Synchronization

/// Signal event logging through swift-log: subscribe, next, error, completed and dispose, with the signal's name.
///
/// Off by default; on for one signal with `signal.logEvents(to:)` (RAC's `logAll`), for every
/// later subscription with `SignalLogging.logger`, or with `REACTIVEUV_DEBUG_SIGNALS=1` (to
/// standard error as `ReactiveUV: [name] next(1)` without a logger). Values log at `.trace`, the
/// rest at `.debug`, with the metadata `signal` (the name) and `event`.
///
/// Thread rule: safe from any thread.
public enum SignalLogging {
    /// The logger every subscription made from now on logs its events to; nil (the default) is off.
    /// A subscription keeps the logger it was made with.
    ///
    /// Thread rule: safe from any thread.
    public static var logger: Logger? {
        get { configured.withLock { $0 } }
        set {
            // Stored under the lock, so racing setters leave the flag matching the logger.
            configured.withLock { logger in
                logger = newValue
                isOn.store(newValue != nil || DebugSignals.isEnabled, ordering: .relaxed)
            }
        }
    }

    private static let configured = LockedValue<Logger?>(nil)
    /// Written under `configured`'s lock, read without it.
    @usableFromInline static let isOn = Atomic<Bool>(DebugSignals.isEnabled)

    /// Whether subscriptions log (relaxed: one racing with the setter may miss a change).
    @inlinable
    package static var isActive: Bool { isOn.load(ordering: .relaxed) }

    /// The logger for a new subscription: the configured one, else standard error under the environment switch.
    static func subscriptionLogger() -> Logger? {
        if let logger { return logger }
        return DebugSignals.isEnabled ? standardErrorLogger : nil
    }

    /// `REACTIVEUV_DEBUG_SIGNALS` without a logger: every level, to standard error.
    private static let standardErrorLogger: Logger = {
        var logger = Logger(label: "ReactiveUV.signals", factory: { _ in StandardErrorSignalLogHandler() })
        logger.logLevel = .trace
        return logger
    }()
}

/// Logs one subscription's events. Immutable once made.
final class SignalEventLogger: Sendable {
    let logger: Logger
    let name: String

    init(logger: Logger, name: String) {
        self.logger = logger
        self.name = name.isEmpty ? "signal" : name
    }

    func subscribed() {
        write(.debug, "subscribe", "subscribe")
    }

    func disposed() {
        write(.debug, "dispose", "dispose")
    }

    func log<Value>(_ event: Event<Value>) {
        switch event {
        case .next: write(.trace, "next", "\(event)")
        case .error: write(.debug, "error", "\(event)")
        case .completed: write(.debug, "completed", "completed")
        }
    }

    private func write(_ level: Logger.Level, _ kind: String, _ text: @autoclosure () -> String) {
        // The level check first, so a filtered entry builds no string.
        guard logger.logLevel <= level else { return }
        logger.log(level: level, "[\(name)] \(text())", metadata: ["signal": "\(name)", "event": "\(kind)"])
    }
}

/// The environment switch's handler: `ReactiveUV: [name] next(1)` on standard error.
private struct StandardErrorSignalLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        reportMisuse("\(event.message)")
    }
}

extension Signal {
    /// `subscribe`'s logging path (kept out of line): logs subscribe, each event and dispose.
    @usableFromInline
    @inline(never)
    func startLogging(_ sink: SinkSubscription<Value>) {
        guard let logger = SignalLogging.subscriptionLogger() else {
            start(sink: sink)
            return
        }
        let log = SignalEventLogger(logger: logger, name: name)
        log.subscribed()
        sink.add(ActionDisposable { log.disposed() })
        // The logger sits between the source and the callbacks, as an operator would.
        let downstream = Observer.sink(sink).closures(values: false).event
        start(ClosureObserver(event: { event in
            log.log(event)
            downstream(event)
        }), on: sink)
    }

    /// Logs this signal's events through `logger`: subscribe, each value, error, completed, dispose (RAC's `logAll`).
    ///
    /// One entry per event of each subscription, on its home thread, as `SignalLogging` describes;
    /// `logger`'s level filters them; `name` nil logs the signal's `name`.
    ///
    /// Thread rule: safe from any thread.
    public func logEvents(to logger: Logger, name: String? = nil) -> Signal<Value> {
        let label = name ?? self.name
        return lift { downstream, subscription in
            let log = SignalEventLogger(logger: logger, name: label)
            log.subscribed()
            subscription.add(ActionDisposable { log.disposed() })
            return { event in
                log.log(event)
                downstream(event)
            }
        }.debugNamed("[\(self.name)] -logEvents")
    }
}

import Synchronization

/// An action triggered on demand, with observable state: RAC's `RACCommand`, bound to a loop instead of the main thread.
///
/// `execute(_:)` starts the signal the block makes for an input, unless the command is disabled,
/// subscribed on the command's scheduler and shared (replayed to each subscriber). `enabled` is
/// `enabledIf`'s latest value (true until it sends) and, unless `allowsConcurrentExecution`, no
/// execution running. `executing` and `enabled` are recomputed on the command's scheduler and
/// complete when the command is freed.
///
/// Thread rule: safe from any thread.
public final class Command<Input, Output: Sendable>: @unchecked Sendable {
    // Sendable: `state` is behind its mutex; the subjects and `scheduler` are immutable and thread-safe.
    private struct State {
        var running = 0
        var enabledByInput = true
        var allowsConcurrentExecution: Bool
    }
    private let state: LockedValue<State>
    private let makeExecution: (Input) -> Signal<Output>
    private let scheduler: Scheduler
    private let executingSubject = BehaviorSubject(initial: false)
    private let enabledSubject: BehaviorSubject<Bool>
    private let errorsSubject = Subject<any Error>()
    private let executionsSubject = Subject<Signal<Output>>()
    private let enabledInput = SerialDisposable()

    /// Creates a command.
    ///
    /// - Parameters:
    ///   - enabledIf: Whether the command may execute, over time; nil for always (apart from the concurrency rule).
    ///   - allowsConcurrentExecution: Whether `execute` may start while an execution is running.
    ///   - scheduler: Where executions are subscribed and state is recomputed; nil for the calling
    ///     thread's loop (or test scheduler), else `EventLoop.shared`.
    ///   - execute: Makes the signal of one execution.
    ///
    /// Thread rule: safe from any thread.
    public init(enabledIf: Signal<Bool>? = nil, allowsConcurrentExecution: Bool = false, on scheduler: Scheduler? = nil,
                _ execute: @escaping @Sendable (Input) -> Signal<Output>) {
        self.scheduler = scheduler ?? Scheduler.current ?? Runtime.defaultScheduler
        self.makeExecution = execute
        state = LockedValue(State(allowsConcurrentExecution: allowsConcurrentExecution))
        enabledSubject = BehaviorSubject(initial: true)
        if let enabledIf {
            enabledInput.inner = enabledIf.subscribe(on: self.scheduler).subscribeNext { [weak self] enabled in
                guard let self else { return }
                state.withLock { $0.enabledByInput = enabled }
                publish()
            }
        }
    }

    deinit {
        enabledInput.dispose()
        executingSubject.sendCompleted()
        enabledSubject.sendCompleted()
        errorsSubject.sendCompleted()
        executionsSubject.sendCompleted()
    }

    /// Starts an execution for `input`, if the command is enabled: at once, shared, replayed to each subscriber.
    ///
    /// - Returns: The execution's events; if the command is disabled, a signal that fails with
    ///   `CommandError.notEnabled` (nothing started).
    ///
    /// Thread rule: safe from any thread; the block is called on the calling thread.
    @discardableResult
    public func execute(_ input: Input) -> Signal<Output> {
        let started = state.withLock { state -> Bool in
            guard state.enabledByInput, state.allowsConcurrentExecution || state.running == 0 else { return false }
            state.running += 1
            return true
        }
        guard started else { return Signal.error(CommandError.notEnabled) }
        publish()
        let connection = makeExecution(input).subscribe(on: scheduler).multicast(ReplaySubject.unbounded())
        executionsSubject.sendNext(connection.signal.catchTo(.empty))
        connection.signal.subscribe(error: { [weak self] error in
            self?.errorsSubject.sendNext(error)
            self?.executionEnded()
        }, completed: { [weak self] in
            self?.executionEnded()
        })
        connection.connect()
        return connection.signal
    }

    /// Each execution's signal, as it starts (errors replaced by completion; see `errors`).
    ///
    /// Thread rule: safe from any thread.
    public var executionSignals: Signal<Signal<Output>> { executionsSubject }

    /// Whether an execution is running: the current value first, then each change.
    ///
    /// Thread rule: safe from any thread.
    public var executing: Signal<Bool> { executingSubject.distinctUntilChanged() }

    /// Whether `execute` would start an execution: the current value first, then each change.
    ///
    /// Thread rule: safe from any thread.
    public var enabled: Signal<Bool> { enabledSubject.distinctUntilChanged() }

    /// The error of each execution that fails (the command itself never fails).
    ///
    /// Thread rule: safe from any thread.
    public var errors: Signal<any Error> { errorsSubject }

    /// Whether `execute` may start while an execution is running (RAC's default: no).
    ///
    /// Thread rule: safe from any thread.
    public var allowsConcurrentExecution: Bool {
        get { state.withLock { $0.allowsConcurrentExecution } }
        set {
            state.withLock { $0.allowsConcurrentExecution = newValue }
            publish()
        }
    }

    private func executionEnded() {
        state.withLock { $0.running -= 1 }
        publish()
    }

    /// Sends the current `executing`/`enabled` values on the command's scheduler; each run reads the
    /// state then, so the last values sent are the current ones.
    private func publish() {
        if scheduler.isCurrent {
            publishNow()
        } else {
            _ = scheduler.schedule { [weak self] in self?.publishNow() }
        }
    }

    private func publishNow() {
        let (executing, enabled) = state.withLock { state in
            (state.running > 0, state.enabledByInput && (state.allowsConcurrentExecution || state.running == 0))
        }
        executingSubject.sendNext(executing)
        enabledSubject.sendNext(enabled)
    }
}

/// Why a `Command` refused to execute.
///
/// Thread rule: a value type; safe from any thread.
public enum CommandError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `execute` was called while the command was disabled (RAC's `RACCommandErrorNotEnabled`).
    case notEnabled

    /// A sentence for a human.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .notEnabled:
            return "the command is disabled (its enabledIf signal sent false, or an execution is running and concurrent execution is not allowed)"
        }
    }
}

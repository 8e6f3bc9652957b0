import Synchronization

/// The buffer between one subscription and one iterating task.
///
/// Its methods run unspecialized for a value type from another module, where every type built on
/// `Value` needs a metadata lookup: so only the buffer and `handoff` are, the continuation carries
/// nothing, and the hot cases (`[UInt8]`, `DirectoryEntry`) are specialized.
@usableFromInline
final class ValuesChannel<Value>: @unchecked Sendable {
    // Sendable: `lock` guards `state` and `handoff`; `receiverControl` is the serialized `receive`'s own; continuations are resumed after unlocking.
    @usableFromInline
    struct State {
        /// Waiting values from `head` on.
        @usableFromInline var buffer: [Value?] = []
        @usableFromInline var head = 0
        var terminal: Result<Void, any Error>?
        /// The waiting task's continuation, taken under the lock by its one resumer; a value for the
        /// task goes in `handoff`.
        var waiter: BridgeContinuation<Void>?
        var subscription: Subscription?
        var started = false
        @usableFromInline var finished = false
        /// The consumer is gone: a subscription made later is disposed at once.
        var cancelled = false
        @usableFromInline var paused = false
        /// The flow control `paused` applies to.
        var pausedControl: FlowControl?
        /// Numbers pause and resume requests, so the source applies only the newest.
        var flowRequest = 0
        /// Byte chunks in a bounded buffer: `bufferedBytes` counts them.
        @usableFromInline let countsBytes: Bool
        @usableFromInline var bufferedBytes = 0
        /// Told when the task has taken the end.
        var endControl: FlowControl?
        /// Kept from the first value on (the subscription drops it at the end).
        var sourceControl: FlowControl?

        init(countsBytes: Bool) { self.countsBytes = countsBytes }

        @inlinable var count: Int { buffer.count - head }

        /// Whether the buffer holds enough to pause a source: `limit` values, or `maxBufferedBytes` bytes of chunks.
        func isFull(limit: Int) -> Bool {
            count >= limit || (countsBytes && bufferedBytes >= ValuesBufferPolicy.maxBufferedBytes)
        }

        /// Whether a paused source may resume: down to half of both bounds.
        func hasDrained(limit: Int) -> Bool {
            count <= limit / 2 && (!countsBytes || bufferedBytes <= ValuesBufferPolicy.maxBufferedBytes / 2)
        }

        mutating func append(_ value: Value) {
            if countsBytes { bufferedBytes += unsafeBitCast(value, to: [UInt8].self).count }
            buffer.append(value)
        }

        @inlinable
        mutating func popFirst() -> Value? {
            guard head < buffer.count else { return nil }
            let value = buffer[head]
            buffer[head] = nil
            head += 1
            if countsBytes, let value { bufferedBytes -= unsafeBitCast(value, to: [UInt8].self).count }
            if head > 64 && head * 2 > buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            return value
        }
    }

    private let signal: Signal<Value>
    private let policy: ValuesBufferPolicy
    @usableFromInline let lock = SpinLock()
    @usableFromInline @exclusivity(unchecked) var state: State
    /// The value for the task `state.waiter` woke.
    @exclusivity(unchecked) private var handoff: Value?
    /// The source's flow control once found: read and written only by `receive`, whose calls the
    /// subscription serializes.
    @exclusivity(unchecked) private var receiverControl: FlowControl?

    init(signal: Signal<Value>, policy: ValuesBufferPolicy) {
        self.signal = signal
        self.policy = policy
        // Byte chunks are weighed by size in a bounded buffer.
        var bounded = false
        if case .bounded = policy { bounded = true }
        state = State(countsBytes: bounded && Value.self == [UInt8].self)
    }

    deinit {
        // Reached once the subscription let go of its callbacks; disposing again is harmless.
        state.subscription?.dispose()
    }

    private func locked<R>(_ body: (inout State) -> R) -> R {
        lock.withLock { body(&state) }
    }

    /// Tells a source waiting for it (a connection closing after the peer's EOF) that the task is
    /// done with the sequence: the code after its loop runs.
    private func acknowledgeEnd() {
        let control = locked { state -> FlowControl? in
            let control = state.endControl
            state.endControl = nil
            return control
        }
        control?.endTaken()
    }

    /// The next value; waits on the caller's executor. Nonsending: a value that is ready costs the
    /// iterating task no executor switch on the way in (the runtime's switch checks take a lock).
    @usableFromInline
    @_specialize(exported: false, where Value == [UInt8])
    @_specialize(exported: false, where Value == DirectoryEntry)
    nonisolated(nonsending) func next() async throws -> Value? {
        let actor = #isolation
        if Task.isCancelled {
            // Cancellation ends the sequence at once, not after the buffer drained.
            cancel()
            return nil
        }
        var value: Value?
        if try takeReady(&value) { return value }
        try await withTaskCancellationHandler(operation: {
            try await withBridgeContinuation(isolation: actor) { (continuation: BridgeContinuation<Void>) in
                // Something arrived since `takeReady`: taken below. Else wait.
                let arrived = locked { state -> Bool in
                    if state.count > 0 || state.terminal != nil { return true }
                    state.waiter = continuation
                    return false
                }
                if arrived {
                    continuation.resume()
                } else {
                    // Subscribing once a task waits sends the first value straight to it.
                    startIfNeeded()
                }
            }
        }, onCancel: {
            cancel()
        }, isolation: actor)
        // Woken with a value (`handoff`), or to take what arrived, or the end.
        value = lock.withLock {
            let handed = handoff
            handoff = nil
            return handed
        }
        if value != nil { return value }
        _ = try takeReady(&value)
        return value
    }

    /// The first buffered value, if one is waiting and nothing else needs doing (no source to
    /// resume, no end to take): the iterator's inlined fast path. Nil sends it to `next()`.
    @inlinable
    func takeBuffered() -> Value? {
        lock.lock()
        defer { lock.unlock() }
        guard !state.finished, !state.paused, state.count > 0 else { return nil }
        return state.popFirst()
    }

    /// A value (or the end) ready without waiting: true with `value` set (nil at the end), false when
    /// nothing is there yet; resumes a paused source that drained. Throws the signal's error.
    @_specialize(exported: false, where Value == [UInt8])
    @_specialize(exported: false, where Value == DirectoryEntry)
    private func takeReady(_ value: inout Value?) throws -> Bool {
        var resume: (FlowControl, Int)?
        var failure: (any Error)?
        let ready = locked { state -> Bool in
            if state.finished { return true }
            if let first = state.popFirst() {
                value = first
                if state.paused, let limit = policy.limit, state.hasDrained(limit: limit), let control = state.pausedControl {
                    state.paused = false
                    state.flowRequest += 1
                    resume = (control, state.flowRequest)
                }
                return true
            }
            if let terminal = state.terminal {
                state.finished = true
                if case .failure(let error) = terminal { failure = error }
                return true
            }
            return false
        }
        // The request number keeps a late pause from undoing this.
        if let (control, request) = resume { control.setConsumerPaused(false, request: request) }
        if let failure { throw failure }
        return ready
    }

    @_specialize(exported: false, where Value == [UInt8])
    @_specialize(exported: false, where Value == DirectoryEntry)
    private func startIfNeeded() {
        let start = locked { state -> Bool in
            if state.started { return false }
            state.started = true
            return true
        }
        guard start else { return }
        // A limit below 1 keeps nothing, or overflows at once: refused before the source starts.
        if let refusal = policy.refusal {
            finish(.failure(refusal))
            return
        }
        let subscription = SinkSubscription<Value>(
            next: { [self] in receive($0) },
            error: { [self] in finish(.failure($0)) },
            completed: { [self] in finish(.success(())) })
        // Kept before it starts: a value sent at once from another thread finds its flow control.
        let cancelled = locked { state -> Bool in
            if state.cancelled { return true }
            state.subscription = subscription
            return false
        }
        if cancelled { return subscription.dispose() }
        signal.start(sink: subscription)
        // Cancelled meanwhile (`cancel` disposed it), or overflowed while subscribing: dispose now.
        if locked({ $0.terminal != nil }) { subscription.dispose() }
    }

    /// A value from the subscription (home thread).
    @_specialize(exported: false, where Value == [UInt8])
    @_specialize(exported: false, where Value == DirectoryEntry)
    private func receive(_ value: Value) {
        if ValuesDeliveryTestHook.isSet.load(ordering: .relaxed), ValuesDeliveryTestHook.run() { return }
        var overflow = false
        var pause: Int?
        var flowControl = receiverControl
        if flowControl == nil {
            flowControl = locked { $0.subscription }?.flowControl
            receiverControl = flowControl
        }
        let waiter: BridgeContinuation<Void>? = locked { state in
            if state.terminal != nil { return nil }
            if state.sourceControl == nil { state.sourceControl = flowControl }
            if let waiter = state.waiter {
                state.waiter = nil
                handoff = value
                return waiter
            }
            state.append(value)
            switch policy {
            case .unbounded:
                break
            case .keepNewest(let limit):
                if state.count > limit { _ = state.popFirst() }
            case .keepOldest(let limit):
                if state.count > limit { state.buffer.removeLast() }
            case .bounded(let limit):
                if let flowControl {
                    if state.isFull(limit: limit) && !state.paused {
                        state.paused = true
                        state.pausedControl = flowControl
                        state.flowRequest += 1
                        pause = state.flowRequest
                    }
                } else if state.count > limit {
                    overflow = true
                    state.terminal = .failure(SignalValuesError.bufferOverflow(capacity: limit))
                }
            }
            return nil
        }
        if let pause { flowControl?.setConsumerPaused(true, request: pause) }
        waiter?.resume()
        if overflow {
            locked { $0.subscription }?.dispose()
            wakeWaiter()
        }
    }

    @_specialize(exported: false, where Value == [UInt8])
    @_specialize(exported: false, where Value == DirectoryEntry)
    private func finish(_ terminal: Result<Void, any Error>) {
        // A source that can pause learns the end is taken at `acknowledgeEnd`, not when buffered here.
        // The subscription let go of its flow control by now: `receive` kept it.
        let control = locked { $0.sourceControl ?? $0.subscription?.flowControl }
        control?.consumerTakesEndLater.store(true, ordering: .releasing)
        let takenAlready = locked { state -> Bool in
            if state.terminal == nil { state.terminal = terminal }
            if state.cancelled { return true }
            state.endControl = control
            return false
        }
        if takenAlready { control?.endTaken() }
        wakeWaiter()
    }

    @_specialize(exported: false, where Value == [UInt8])
    @_specialize(exported: false, where Value == DirectoryEntry)
    private func wakeWaiter() {
        let (waiter, terminal): (BridgeContinuation<Void>?, Result<Void, any Error>?) = locked { state in
            guard let waiter = state.waiter, let terminal = state.terminal, state.count == 0 else { return (nil, nil) }
            state.waiter = nil
            state.finished = true
            return (waiter, terminal)
        }
        if let waiter, let terminal { waiter.resume(with: terminal) }
    }

    /// The consuming task was cancelled or the iterator dropped: dispose and end the sequence,
    /// letting the subscription go so the channel is freed without waiting for the home loop.
    func cancel() {
        let (subscription, waiter): (Subscription?, BridgeContinuation<Void>?) = locked { state in
            if state.terminal == nil { state.terminal = .success(()) }
            state.finished = true
            state.cancelled = true
            state.buffer = []
            state.head = 0
            state.bufferedBytes = 0
            state.sourceControl = nil
            let waiter = state.waiter
            state.waiter = nil
            let subscription = state.subscription
            state.subscription = nil
            return (subscription, waiter)
        }
        // `dispose()` never waits for a delivery in progress (this runs under the task's lock, and that
        // delivery may be resuming this task): what arrives later finds the channel ended.
        subscription?.dispose()
        acknowledgeEnd()
        // Last: once resumed, the task may end and free this channel (its handler holds it unretained).
        waiter?.resume()
    }
}

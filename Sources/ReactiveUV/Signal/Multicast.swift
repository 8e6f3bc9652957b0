import Synchronization

/// Shares one subscription to a source among many subscribers, through a subject: RAC's `RACMulticastConnection`.
///
/// Subscribe to `signal` (the subject) as often as you like; the source is
/// subscribed once, when `connect()` is called, and its events are sent to the
/// subject. `autoconnect()` connects on the first subscriber and disposes the
/// source when the last one leaves.
///
/// Thread rule: safe from any thread.
public final class MulticastConnection<Value>: @unchecked Sendable {
    // `source` and `subject` are immutable; `state` is protected by its mutex.
    private struct State {
        /// The live connection, if any: a disposed one no longer counts.
        var connection: SerialDisposable?
        /// Subscribers of `autoconnect()` signals currently subscribed.
        var autoSubscribers = 0
    }
    private let source: Signal<Value>
    private let subject: Subject<Value>
    private let state = LockedValue(State())

    /// Creates a connection that will feed `source`'s events to `subject`.
    ///
    /// - Parameters:
    ///   - source: The signal to share.
    ///   - subject: The subject subscribers attach to.
    /// - Returns: A connection, not yet connected.
    ///
    /// Thread rule: safe from any thread.
    public init(source: Signal<Value>, subject: Subject<Value>) {
        self.source = source
        self.subject = subject
    }

    /// The shared signal (the subject). Subscribing to it does not connect.
    ///
    /// Thread rule: safe from any thread.
    public var signal: Signal<Value> { subject }

    /// Subscribes the subject to the source, unless already connected; returns the connection.
    ///
    /// Idempotent: while connected, every call returns the same disposable and
    /// the source stays subscribed once. Disposing it disconnects the source;
    /// a later `connect()` then subscribes it again (a source that already
    /// ended has ended the subject too, so that only matters after an early
    /// disconnect). The source is subscribed from the calling thread (its home
    /// is that thread's loop, else `EventLoop.shared`).
    ///
    /// - Returns: The connection; dispose it to disconnect.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func connect() -> any Disposable {
        let (connection, isNew) = state.withLock { state -> (SerialDisposable, Bool) in
            if let current = state.connection, !current.isDisposed { return (current, false) }
            let fresh = SerialDisposable()
            state.connection = fresh
            return (fresh, true)
        }
        if isNew {
            let subject = self.subject
            // Swapped in, not assigned: a dispose that raced us disposes the new subscription at once.
            _ = connection.swap(source.subscribe(next: { subject.sendNext($0) },
                                                 error: { subject.sendError($0) },
                                                 completed: { subject.sendCompleted() }))
        }
        return connection
    }

    /// A signal that connects when its first subscriber arrives and disconnects when the last one leaves (RAC's `-autoconnect`).
    ///
    /// Subscribers share the one connection. After the last subscriber
    /// leaves, the next one connects again.
    ///
    /// - Returns: The auto-connecting signal.
    ///
    /// Thread rule: safe from any thread.
    public func autoconnect() -> Signal<Value> {
        Signal { [self] subscriber in
            state.withLock { $0.autoSubscribers += 1 }
            let forwarding = subject.subscribe(subscriber)
            connect()
            return ActionDisposable { [self] in
                forwarding.dispose()
                let last = state.withLock { state -> SerialDisposable? in
                    state.autoSubscribers -= 1
                    guard state.autoSubscribers == 0 else { return nil }
                    let connection = state.connection
                    state.connection = nil
                    return connection
                }
                last?.dispose()
            }
        }.debugNamed("[\(source.name)] -autoconnect")
    }
}

extension Signal {
    /// Shares this signal through a plain `Subject` (RAC's `-publish`).
    ///
    /// - Returns: A connection; subscribers of its `signal` get the events sent after they subscribed.
    ///
    /// Thread rule: safe from any thread.
    public func publish() -> MulticastConnection<Value> {
        multicast(Subject())
    }

    /// Shares this signal through `subject` (RAC's `-multicast:`).
    ///
    /// - Parameter subject: The subject subscribers attach to.
    /// - Returns: A connection, not yet connected.
    ///
    /// Thread rule: safe from any thread.
    public func multicast(_ subject: Subject<Value>) -> MulticastConnection<Value> {
        MulticastConnection(source: self, subject: subject)
    }

    /// Subscribes now and replays the last `capacity` values to every subscriber (RAC's `-replay`, bounded).
    ///
    /// The source is subscribed at once, once. RAC's `-replay` keeps every
    /// value; here the default keeps the newest `ReplaySubject.defaultCapacity`
    /// values, and `replayUnbounded()` keeps all of them.
    ///
    /// - Parameter capacity: How many of the newest values to keep.
    /// - Returns: The shared, replaying signal.
    ///
    /// Thread rule: safe from any thread.
    public func replay(capacity: Int = ReplaySubject<Value>.defaultCapacity) -> Signal<Value> {
        let connection = multicast(ReplaySubject(capacity: capacity))
        connection.connect()
        return connection.signal.debugNamed("[\(name)] -replay")
    }

    /// Subscribes now and replays every value to every subscriber (RAC's `-replay`); memory grows with each value.
    ///
    /// - Returns: The shared, replaying signal.
    ///
    /// Thread rule: safe from any thread.
    public func replayUnbounded() -> Signal<Value> {
        let connection = multicast(ReplaySubject.unbounded())
        connection.connect()
        return connection.signal.debugNamed("[\(name)] -replayUnbounded")
    }

    /// Subscribes now and replays the latest value to every subscriber (RAC's `-replayLast`).
    ///
    /// - Returns: The shared signal.
    ///
    /// Thread rule: safe from any thread.
    public func replayLast() -> Signal<Value> {
        let connection = multicast(ReplaySubject(capacity: 1))
        connection.connect()
        return connection.signal.debugNamed("[\(name)] -replayLast")
    }

    /// Like `replay(capacity:)`, but subscribes to the source only when the first subscriber arrives (RAC's `-replayLazily`).
    ///
    /// The source stays connected after subscribers leave (as in RAC), so late subscribers still get the replay.
    ///
    /// - Parameter capacity: How many of the newest values to keep.
    /// - Returns: The shared, replaying signal.
    ///
    /// Thread rule: safe from any thread.
    public func replayLazily(capacity: Int = ReplaySubject<Value>.defaultCapacity) -> Signal<Value> {
        let connection = multicast(ReplaySubject(capacity: capacity))
        return Signal.defer {
            connection.connect()
            return connection.signal
        }.debugNamed("[\(name)] -replayLazily")
    }

    /// Like `replayLazily(capacity:)`, keeping every value; memory grows with each value.
    ///
    /// - Returns: The shared, replaying signal.
    ///
    /// Thread rule: safe from any thread.
    public func replayLazilyUnbounded() -> Signal<Value> {
        let connection = multicast(ReplaySubject.unbounded())
        return Signal.defer {
            connection.connect()
            return connection.signal
        }.debugNamed("[\(name)] -replayLazilyUnbounded")
    }
}

extension ReplaySubject {
    /// The capacity `replay()` and `replayLazily()` use when none is given: 1,024 values.
    ///
    /// Thread rule: safe from any thread.
    public static var defaultCapacity: Int { 1_024 }
}

import Synchronization

/// Shares one subscription to a source among many subscribers, through a subject: RAC's `RACMulticastConnection`.
///
/// Subscribe to `signal` (the subject) freely; `connect()` subscribes the source, once. Two
/// signals connect for you, their subscribers counted together: `autoconnect()` disconnects when
/// the last subscriber leaves and never connects again; `refCount()` connects anew for the next.
///
/// Thread rule: safe from any thread.
public final class MulticastConnection<Value>: @unchecked Sendable {
    // Sendable: `source` and `subject` are immutable; `state` is behind its mutex (never held while calling out).
    private enum Connection {
        /// `connect()` was never called (and no `refCount()` subscriber connected).
        case notConnected
        /// Connected once; the disposable may have been disposed since.
        case connected(SerialDisposable)
    }
    private struct State {
        var connection = Connection.notConnected
        /// Subscribers of `autoconnect()` and `refCount()` signals currently subscribed.
        var sharingSubscribers = 0
    }
    private let source: Signal<Value>
    private let subject: Subject<Value>
    private let state = LockedValue(State())

    /// Creates a connection, not yet connected, that will feed `source`'s events to `subject`.
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

    /// Subscribes the subject to the source the first time it is called; every call returns that connection (RAC's `-connect`).
    ///
    /// Also after it was disposed (RAC 2.5; `refCount()` reconnects). Disposing it disconnects the
    /// source without ending the subject. The source's home is the calling thread's loop, else
    /// `EventLoop.shared`.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func connect() -> any Disposable {
        connection(reconnecting: false)
    }

    /// The current connection, made (and the source subscribed) if there is none or, when `reconnecting`, if it was disposed.
    private func connection(reconnecting: Bool) -> SerialDisposable {
        let (connection, isNew) = state.withLock { state -> (SerialDisposable, Bool) in
            if case .connected(let current) = state.connection, !(reconnecting && current.isDisposed) {
                return (current, false)
            }
            let fresh = SerialDisposable()
            state.connection = .connected(fresh)
            return (fresh, true)
        }
        if isNew {
            let subject = self.subject
            // Swapped in: a dispose that raced us disposes the new subscription at once.
            _ = connection.swap(source.subscribe(next: { subject.sendNext($0) },
                                                 error: { subject.sendError($0) },
                                                 completed: { subject.sendCompleted() }))
        }
        return connection
    }

    /// A signal that connects when its first subscriber arrives and disconnects when the last one leaves, for good (RAC 2.5's `-autoconnect`).
    ///
    /// A later subscriber gets only the subject's terminal event, if the source ended before; use
    /// `refCount()` to connect again.
    ///
    /// Thread rule: safe from any thread.
    public func autoconnect() -> Signal<Value> {
        sharing(reconnecting: false).debugNamed("[\(source.name)] -autoconnect")
    }

    /// A signal that connects when its first subscriber arrives, disconnects when the last one leaves, and connects again for the next one (Rx's `refCount()`).
    ///
    /// The subject is shared throughout, so a source that ended has ended it for later subscribers too.
    ///
    /// Thread rule: safe from any thread.
    public func refCount() -> Signal<Value> {
        sharing(reconnecting: true).debugNamed("[\(source.name)] -refCount")
    }

    private func sharing(reconnecting: Bool) -> Signal<Value> {
        Signal { [self] subscriber in
            state.withLock { $0.sharingSubscribers += 1 }
            let forwarding = subject.subscribe(subscriber)
            _ = connection(reconnecting: reconnecting)
            return ActionDisposable { [self] in
                forwarding.dispose()
                let last = state.withLock { state -> SerialDisposable? in
                    state.sharingSubscribers -= 1
                    guard state.sharingSubscribers == 0, case .connected(let connection) = state.connection else { return nil }
                    return connection
                }
                last?.dispose()
            }
        }
    }
}

extension Signal {
    /// Shares this signal through a plain `Subject` (RAC's `-publish`): subscribers get the events
    /// sent after they subscribed.
    ///
    /// Thread rule: safe from any thread.
    public func publish() -> MulticastConnection<Value> {
        multicast(Subject())
    }

    /// Shares this signal through `subject` (RAC's `-multicast:`); the connection is not yet connected.
    ///
    /// Thread rule: safe from any thread.
    public func multicast(_ subject: Subject<Value>) -> MulticastConnection<Value> {
        MulticastConnection(source: self, subject: subject)
    }

    /// Subscribes now, once, and replays the newest `capacity` values to every subscriber (RAC's
    /// `-replay`, bounded; `replayUnbounded()` keeps all).
    ///
    /// Thread rule: safe from any thread.
    public func replay(capacity: Int = ReplaySubject<Value>.defaultCapacity) -> Signal<Value> {
        let connection = multicast(ReplaySubject(capacity: capacity))
        connection.connect()
        return connection.signal.debugNamed("[\(name)] -replay")
    }

    /// Subscribes now and replays every value to every subscriber (RAC's `-replay`); memory grows with each value.
    ///
    /// Thread rule: safe from any thread.
    public func replayUnbounded() -> Signal<Value> {
        let connection = multicast(ReplaySubject.unbounded())
        connection.connect()
        return connection.signal.debugNamed("[\(name)] -replayUnbounded")
    }

    /// Subscribes now and replays the latest value to every subscriber (RAC's `-replayLast`).
    ///
    /// Thread rule: safe from any thread.
    public func replayLast() -> Signal<Value> {
        let connection = multicast(ReplaySubject(capacity: 1))
        connection.connect()
        return connection.signal.debugNamed("[\(name)] -replayLast")
    }

    /// Like `replay(capacity:)`, but subscribes to the source only when the first subscriber arrives (RAC's `-replayLazily`).
    /// The source stays connected after subscribers leave, so late subscribers still get the replay.
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

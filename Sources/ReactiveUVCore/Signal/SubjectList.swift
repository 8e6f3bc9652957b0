/// The subscriber list of a subject, without its value type (no generic metadata to subscribe or leave).
@usableFromInline
struct SubjectRegistry {
    // Only touched under the subject's lock.
    /// The registered subscribers: gates (`Subscriber<Value>`) and subscriptions that are their own (see `SubjectMember`).
    @usableFromInline var subscribers: ContiguousArray<AnyObject> = []
    /// Counts changes to `subscribers` (and the end), so the owner thread knows its snapshot is stale.
    @usableFromInline var version: UInt64 = 0
    @usableFromInline var terminated = false

    init() {}
}

/// What a subject keeps for later subscribers: the last values (replaying subjects) and its end.
@usableFromInline
struct SubjectReplay<Value> {
    // Only touched under the subject's lock.
    @usableFromInline var terminal: Event<Value>?
    /// How many values to keep: 0 for a plain subject, `Int.max` for unbounded replay.
    @usableFromInline let capacity: Int
    @usableFromInline var buffer = RingBuffer<Value>()

    init(capacity: Int) {
        self.capacity = capacity
    }

    @usableFromInline
    mutating func record(_ value: Value) {
        if capacity == 0 { return }
        if buffer.count >= capacity { _ = buffer.popFirst() }
        buffer.append(value)
    }
}

/// An immutable copy of a subject's subscriber list, built under its lock after a change and
/// walked by senders without retaining each subscriber (it holds one reference to each).
@usableFromInline
final class SubjectSnapshot<Value> {
    // Immutable after init; freed (releasing the subscribers) when the last sender lets go.
    @usableFromInline let count: Int
    @usableFromInline let elements: UnsafeMutablePointer<SubjectMember<Value>>

    /// `subscribers` is the subject's list; `gateType` is `Subscriber<Value>.self` (see `SubjectMember`).
    init(_ subscribers: ContiguousArray<AnyObject>, gateType: AnyObject.Type) {
        count = subscribers.count
        elements = .allocate(capacity: max(1, count))
        for (index, subscriber) in subscribers.enumerated() {
            (elements + index).initialize(to: SubjectMember(subscriber, gateType: gateType))
            _ = Unmanaged.passRetained(subscriber)
        }
    }

    deinit {
        for index in 0..<count { elements[index].object.release() }
        elements.deallocate()
    }

    @inlinable
    func send(_ event: Event<Value>, current: UnsafeMutableRawPointer?) {
        var index = 0
        while index < count {
            elements[index].send(event, current: current)
            index += 1
        }
    }

    @inlinable
    package func sendNext(_ value: Value, current: UnsafeMutableRawPointer?) {
        var index = 0
        while index < count {
            elements[index].sendNext(value, current: current)
            index &+= 1
        }
    }
}

/// One of a subject's registrants, as senders see it: its gate (a `Subscriber`), or a subscription with
/// callbacks registered as its own gate (`SinkSubscription`: the subject's sink lane, with no
/// `Subscriber`). One word, the object's address with its low bit set for a sink; it holds no
/// reference: whoever keeps one keeps the object alive.
@usableFromInline
struct SubjectMember<Value> {
    // Immutable.
    @usableFromInline let bits: UInt

    /// `object`, a registrant of a `Subject<Value>`; `gateType` is `Subscriber<Value>.self`, looked up
    /// once by the subject, so telling the two apart costs no metadata lookup.
    init(_ object: AnyObject, gateType: AnyObject.Type) {
        let address = UInt(bitPattern: Unmanaged.passUnretained(object).toOpaque())
        bits = type(of: object) == gateType ? address : address | 1
    }

    /// No registrant (`Subject.cachedSingle` when the list has not exactly one).
    @inlinable
    static var none: SubjectMember<Value> { SubjectMember(bits: 0) }

    @inlinable
    init(bits: UInt) {
        self.bits = bits
    }

    /// The registrant.
    @inlinable
    var object: Unmanaged<AnyObject> {
        Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits & ~1).unsafelyUnwrapped)
    }

    @inlinable
    func sendNext(_ value: Value, current: UnsafeMutableRawPointer?) {
        if bits & 1 == 0 {
            Unmanaged<Subscriber<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
                ._withUnsafeGuaranteedRef { $0.sendNext(value, current: current) }
        } else {
            Unmanaged<SinkSubscription<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: bits &- 1).unsafelyUnwrapped)
                ._withUnsafeGuaranteedRef { $0.receiveNext(value, current: current) }
        }
    }

    @inlinable
    func send(_ event: Event<Value>, current: UnsafeMutableRawPointer?) {
        let address = UnsafeRawPointer(bitPattern: bits & ~1).unsafelyUnwrapped
        if bits & 1 == 0 {
            Unmanaged<Subscriber<Value>>.fromOpaque(address)._withUnsafeGuaranteedRef { $0.send(event, current: current) }
        } else {
            Unmanaged<SinkSubscription<Value>>.fromOpaque(address)._withUnsafeGuaranteedRef { $0.receive(event, current: current) }
        }
    }
}

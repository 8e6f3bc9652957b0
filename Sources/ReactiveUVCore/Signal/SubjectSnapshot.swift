/// An immutable copy of a subject's subscriber list, built under its lock after a change and
/// walked by senders without retaining each subscriber (it holds one reference to each).
@usableFromInline
final class SubjectSnapshot<Value> {
    // Immutable after init; freed (releasing the subscribers) when the last sender lets go.
    @usableFromInline let count: Int
    @usableFromInline let elements: UnsafeMutablePointer<Unmanaged<Subscriber<Value>>>

    init(_ subscribers: ContiguousArray<AnyObject>) {
        count = subscribers.count
        elements = .allocate(capacity: max(1, count))
        for (index, subscriber) in subscribers.enumerated() {
            (elements + index).initialize(to: Unmanaged.passRetained(unsafeDowncast(subscriber, to: Subscriber<Value>.self)))
        }
    }

    deinit {
        for index in 0..<count { elements[index].release() }
        elements.deallocate()
    }

    @inlinable
    func send(_ event: Event<Value>, current: UnsafeMutableRawPointer?) {
        var index = 0
        while index < count {
            elements[index]._withUnsafeGuaranteedRef { $0.send(event, current: current) }
            index += 1
        }
    }

    @inlinable
    package func sendNext(_ value: Value, current: UnsafeMutableRawPointer?) {
        var index = 0
        while index < count {
            elements[index]._withUnsafeGuaranteedRef { $0.sendNext(value, current: current) }
            index &+= 1
        }
    }
}


/// A read-only observable value: a current `value` and a `signal` that sends it first, then every change.
///
/// Made from a `MutableProperty`, a constant, or a signal with an initial value; `map` and
/// `combineLatest(with:)` derive properties whose signals also start with the current value.
///
/// Thread rule: safe from any thread.
public final class Property<Value>: @unchecked Sendable {
    // Sendable: `current` and `signal` are immutable; what they read is thread-safe.
    private let current: () -> Value
    /// Keeps a `init(initial:then:)` source subscribed for the property's lifetime.
    private let upkeep: ScopedDisposable?

    /// The current value, then every change.
    ///
    /// Thread rule: safe from any thread.
    public let signal: Signal<Value>

    /// A read-only view of `property`.
    ///
    /// Thread rule: safe from any thread.
    public init(_ property: MutableProperty<Value>) {
        current = { property.value }
        signal = property.signal
        upkeep = nil
    }

    /// A property that never changes: its signal sends `value` and completes.
    ///
    /// Thread rule: safe from any thread.
    public init(constant value: Value) {
        let box = UncheckedSendable(value)
        current = { box.value }
        signal = Signal.return(value)
        upkeep = nil
    }

    /// A property that starts at `initial` and takes each value of `source` (subscribed now, for the property's lifetime).
    ///
    /// Thread rule: safe from any thread.
    public init(initial: Value, then source: Signal<Value>) {
        let storage = MutableProperty(initial)
        current = { storage.value }
        signal = storage.signal
        upkeep = ScopedDisposable(storage.bind(from: source))
    }

    private init(current: @escaping () -> Value, signal: Signal<Value>) {
        self.current = current
        self.signal = signal
        upkeep = nil
    }

    /// The current value.
    ///
    /// Thread rule: safe from any thread.
    public var value: Value { current() }

    /// A property whose value is `transform` of this one's (run on each read and for each value sent).
    ///
    /// Thread rule: safe from any thread.
    public func map<U>(_ transform: @escaping @Sendable (Value) -> U) -> Property<U> {
        Property<U>(current: { transform(self.value) }, signal: signal.map(transform))
    }

    /// A property holding this property's value paired with `other`'s: the current pair at once,
    /// then a new pair when either changes.
    ///
    /// Thread rule: safe from any thread.
    public func combineLatest<U>(with other: Property<U>) -> Property<(Value, U)> {
        Property<(Value, U)>(current: { (self.value, other.value) }, signal: signal.combineLatest(with: other.signal))
    }
}

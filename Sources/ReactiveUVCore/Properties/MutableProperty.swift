/// A value that can be observed: the Linux answer to RAC's `RACObserve`.
///
/// `signal` sends the current value at once, then every change, on each subscriber's home thread.
/// `property <~ signal` binds a signal to it until the signal ends, the binding is disposed, or
/// the property is freed; then its `signal` completes.
///
/// Thread rule: safe from any thread.
public final class MutableProperty<Value>: @unchecked Sendable {
    // Sendable: `subject` and `bindings` are immutable and thread-safe.
    private let subject: BehaviorSubject<Value>
    private let bindings = CompoundDisposable()

    /// Creates a property holding `initial`.
    ///
    /// Thread rule: safe from any thread.
    public init(_ initial: Value) {
        subject = BehaviorSubject(initial: initial)
    }

    deinit {
        bindings.dispose()
        subject.sendCompleted()
    }

    /// The current value; setting it sends the new value to every subscriber.
    ///
    /// Thread rule: safe from any thread (concurrent sets are ordered; the last one wins).
    public var value: Value {
        get { subject.value }
        set { subject.sendNext(newValue) }
    }

    /// The current value, then every change; completes when the property is freed.
    ///
    /// Thread rule: safe from any thread.
    public var signal: Signal<Value> { subject }

    /// A read-only view of this property.
    ///
    /// Thread rule: safe from any thread.
    public var readOnly: Property<Value> { Property(self) }

    /// Sets `value` from each value of `source` until `source` ends (which does not end the property),
    /// the binding is disposed, or this property is freed (the binding holds it weakly).
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func bind(from source: Signal<Value>) -> any Disposable {
        let binding = source.subscribeNext { [weak self] value in self?.value = value }
        bindings.add(binding)
        return binding
    }

    /// Binds `source` to `target` (`target.bind(from: source)`): RAC's `RAC(target, key) = signal`.
    /// The binding also ends when `target` is freed.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public static func <~ (target: MutableProperty<Value>, source: Signal<Value>) -> any Disposable {
        target.bind(from: source)
    }

    /// Binds another property to `target`: `target` follows `source`'s current value and changes.
    /// The binding also ends when `target` is freed.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public static func <~ (target: MutableProperty<Value>, source: Property<Value>) -> any Disposable {
        target.bind(from: source.signal)
    }
}

/// The precedence of `<~`: binds tighter than assignment, groups to the right.
precedencegroup BindingPrecedence {
    associativity: right
    higherThan: AssignmentPrecedence
}

/// The binding operator: `property <~ signal` sets `property` from each value of `signal`.
infix operator <~ : BindingPrecedence

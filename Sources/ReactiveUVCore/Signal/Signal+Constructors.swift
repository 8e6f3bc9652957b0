extension Signal {
    /// A signal that sends one value and completes (RAC's `+return:`).
    ///
    /// Thread rule: safe from any thread.
    public static func `return`(_ value: Value) -> Signal<Value> {
        let box = UncheckedSendable(value)
        return Signal { subscriber in
            subscriber.sendNext(box.value)
            subscriber.sendCompleted()
            return nil
        }.debugNamed("+return: \(value)")
    }

    /// A signal that completes at once without a value.
    ///
    /// Thread rule: safe from any thread.
    public static var empty: Signal<Value> {
        Signal { subscriber in
            subscriber.sendCompleted()
            return nil
        }.debugNamed("+empty")
    }

    /// A signal that never sends anything.
    ///
    /// Thread rule: safe from any thread.
    public static var never: Signal<Value> {
        Signal { _ in nil }.debugNamed("+never")
    }

    /// A signal that fails at once.
    ///
    /// Thread rule: safe from any thread.
    public static func error(_ error: any Error) -> Signal<Value> {
        Signal { subscriber in
            subscriber.sendError(error)
            return nil
        }.debugNamed("+error: \(error)")
    }

    /// A signal that sends each element of a sequence, in order, then completes.
    ///
    /// Thread rule: safe from any thread.
    public static func from<S: Sequence>(_ values: S) -> Signal<Value> where S.Element == Value {
        let box = UncheckedSendable(Array(values))
        return Signal { subscriber in
            for value in box.value {
                if subscriber.isDisposed { return nil }
                subscriber.sendNext(value)
            }
            subscriber.sendCompleted()
            return nil
        }.debugNamed("+from: (\(box.value.count) values)")
    }

    /// A signal that calls `makeSignal` for each subscriber, at subscription, and forwards its events (RAC's `+defer:`).
    ///
    /// Thread rule: safe from any thread.
    public static func `defer`(_ makeSignal: @escaping @Sendable () -> Signal<Value>) -> Signal<Value> {
        Signal { subscriber in
            makeSignal().subscribe(subscriber)
        }.debugNamed("+defer:")
    }
}

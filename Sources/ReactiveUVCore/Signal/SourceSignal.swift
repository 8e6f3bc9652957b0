/// What a signal of a loop-bound source attaches its subscribers to: how an I/O family plugs
/// into the one subscribe path, with no closure per subscription.
/// Thread rule: `attach` runs on the subscription's home thread, as `Signal.attach` does.
package protocol SignalSource<Value>: Sendable {
    associatedtype Value
    /// Connects `observer` to the source inside `subscription` (see `Signal.attach`); `signal`
    /// holds this source, for what must keep it alive.
    static func attach(_ observer: Observer<Value>, to subscription: Subscription, signal: SourceSignal<Self>)
}

/// A signal whose subscribers attach to `source`, stored inline: the loop-bound sources' lane.
/// Thread rule: safe from any thread (the source is immutable).
package final class SourceSignal<Source: SignalSource>: Signal<Source.Value>, @unchecked Sendable {
    // Sendable: `source` is immutable.
    package let source: Source

    // Made where the source's type is known: the source is moved in, not copied through its value witnesses.
    @inlinable
    package init(_ source: consuming Source) {
        self.source = source
        super.init()
    }

    override package func attach(_ observer: Observer<Source.Value>, to subscription: Subscription) {
        Source.attach(observer, to: subscription, signal: self)
    }
}

/// Carries a value to another thread where the type system cannot see why that is safe.
///
/// Used only to hand an event or a closure to a subscription's home loop: the
/// receiving side runs on that loop's thread, one event at a time, so the
/// value is never used from two threads at once.
@usableFromInline
struct UncheckedSendable<Wrapped>: @unchecked Sendable {
    // Safe because every use hands the value to exactly one thread (the subscription's home loop).
    @usableFromInline var value: Wrapped

    @inlinable
    init(_ value: Wrapped) { self.value = value }
}

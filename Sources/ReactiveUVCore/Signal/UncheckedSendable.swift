/// Carries a value to another thread where the type system cannot see why that is safe.
///
/// Used only to hand an event or a closure to a subscription's home loop: the
/// receiving side runs on that loop's thread, one event at a time, so the
/// value is never used from two threads at once.
///
/// Never wrap a tuple that contains a closure: Swift 6.3.1 over-releases the
/// tuple's other references when such a box is captured by an escaping
/// closure and taken apart inside it (debug builds), and its optimizer
/// crashes on the same code ("Found ownership error"). Box each part on its
/// own, or use a small class.
@usableFromInline
package struct UncheckedSendable<Wrapped>: @unchecked Sendable {
    // Safe because every use hands the value to exactly one thread (the subscription's home loop).
    @usableFromInline package var value: Wrapped

    @inlinable
    package init(_ value: Wrapped) { self.value = value }
}

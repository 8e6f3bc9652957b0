/// Carries a value to another thread where the type system cannot see why that is safe: an
/// event or a closure handed to a subscription's home loop, whose thread alone then uses it.
///
/// Never wrap a tuple containing a closure: the compiler over-releases such a box captured by an
/// escaping closure, and its optimizer crashes on it. Box each part, or use a small class.
@usableFromInline
package struct UncheckedSendable<Wrapped>: @unchecked Sendable {
    // Sendable: every use hands the value to exactly one thread (the subscription's home loop).
    @usableFromInline package var value: Wrapped

    @inlinable
    package init(_ value: Wrapped) { self.value = value }
}

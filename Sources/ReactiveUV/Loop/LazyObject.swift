import Synchronization

/// A reference set at most once, from any thread (`AtomicLazyReference`'s job, compiled here so
/// its calls are specialized and inlined).
/// Thread rule: safe from any thread.
struct LazyObject<Instance: AnyObject>: ~Copyable, @unchecked Sendable {
    // Sendable: the atomic word is the only state; it holds the one retain of its object.
    private let word = Atomic<UnsafeMutableRawPointer?>(nil)

    init() {}

    deinit {
        if let object = word.load(ordering: .acquiring) { Unmanaged<Instance>.fromOpaque(object).release() }
    }

    func load() -> Instance? {
        guard let object = word.load(ordering: .acquiring) else { return nil }
        return Unmanaged<Instance>.fromOpaque(object).takeUnretainedValue()
    }

    /// `body` given the object borrowed (no retain), or nil when none is set: a read on a hot path.
    @inline(__always)
    func withLoaded<R>(_ body: (Instance) -> R) -> R? {
        guard let object = word.load(ordering: .acquiring) else { return nil }
        return Unmanaged<Instance>.fromOpaque(object)._withUnsafeGuaranteedRef(body)
    }

    /// Stores `desired` unless an object is there already; returns the one that stays.
    func storeIfNil(_ desired: Instance) -> Instance {
        let retained = Unmanaged.passRetained(desired)
        let (exchanged, original) = word.compareExchange(expected: nil, desired: retained.toOpaque(), ordering: .acquiringAndReleasing)
        guard !exchanged, let original else { return desired }
        retained.release()
        return Unmanaged<Instance>.fromOpaque(original).takeUnretainedValue()
    }
}

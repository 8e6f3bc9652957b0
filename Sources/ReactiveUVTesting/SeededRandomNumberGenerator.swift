/// A random number generator whose whole sequence follows from its seed, so a test that draws from it replays exactly.
///
/// Give it to what takes a generator, such as a jittered `Backoff`, to make a test on virtual time
/// exact on every run and machine. SplitMix64: well spread, not for secrets.
///
/// ```swift
/// let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(5),
///                                   using: SeededRandomNumberGenerator(seed: 42))
/// ```
///
/// Thread rule: a value; each copy draws on its own, on the thread that holds it.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    // A value: whoever holds a copy mutates it alone.
    private var counter: UInt64

    /// A generator whose numbers follow from `seed`.
    ///
    /// - Parameter seed: Any number; equal seeds give equal sequences.
    ///
    /// Thread rule: safe from any thread.
    public init(seed: UInt64) {
        counter = seed
    }

    /// The next 64 random bits of the sequence.
    ///
    /// Thread rule: on the thread that holds this copy.
    public mutating func next() -> UInt64 {
        // The counter steps by the golden ratio's odd constant; each step is mixed by two multiply-xorshifts.
        counter &+= 0x9E37_79B9_7F4A_7C15
        var mixed = counter
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

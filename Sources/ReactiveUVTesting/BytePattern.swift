/// `count` bytes of a deterministic pseudo-random pattern (xorshift64) that differs per
/// `seed`, so a misplaced, repeated or foreign byte in an echo or a copy is caught.
/// The same seed gives the same bytes, and a shorter count a prefix of a longer one.
///
/// Thread rule: safe from any thread.
public func bytePattern(_ count: Int, seed: Int) -> [UInt8] {
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
    var result = [UInt8](repeating: 0, count: max(count, 0))
    result.withUnsafeMutableBytes { bytes in
        var offset = 0
        while offset < bytes.count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            let word = state
            let take = min(8, bytes.count - offset)
            withUnsafeBytes(of: word) { bytes.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: take) }
            offset += take
        }
    }
    return result
}

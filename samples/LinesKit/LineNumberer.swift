#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Numbers lines as their bytes arrive, chunk by chunk: `"N: "` before each line, the line's
/// bytes as they are, `"\n"` (and the prompt) after it.
///
/// A CR right before the LF is dropped (CRLF input), also when the two arrive in different
/// chunks, and so is a CR at the very end of the input. A final line without LF is numbered
/// too; an empty final piece is not a line. A line cut by a chunk's end is handed out in
/// pieces, so no line is held whole: any length goes, in constant memory.
///
/// Thread rule: a value; use each from one thread at a time.
public struct LineNumberer {
    /// Written after each line's LF ("> " on a terminal, else nothing).
    ///
    /// Thread rule: safe from any thread.
    public let prompt: [UInt8]
    /// The number of the last line started.
    ///
    /// Thread rule: the numberer's thread.
    public private(set) var number = 0
    /// A line's `"N: "` was handed out and its LF has not come yet.
    private var inLine = false
    /// The last chunk ended with a CR that was held back: dropped if an LF follows.
    private var heldCarriageReturn = false

    /// A numberer at line 0 that writes `prompt` after each line.
    ///
    /// Thread rule: safe from any thread.
    public init(prompt: [UInt8]) { self.prompt = prompt }

    /// Hands `emit` what to write for `chunk`: one piece per line it ends, and one for a line it leaves open.
    ///
    /// Thread rule: the numberer's thread.
    public mutating func number(_ chunk: [UInt8], _ emit: ([UInt8]) -> Void) {
        chunk.withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress else { return }
            var start = 0
            while start < bytes.count {
                if let found = memchr(base + start, 0x0A, bytes.count - start) {
                    let lineFeed = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
                    var end = lineFeed
                    if end > start, bytes[end - 1] == 0x0D {
                        end -= 1
                    } else if end == start {
                        heldCarriageReturn = false  // the CR that ended the last chunk came right before this LF
                    }
                    emit(piece(UnsafeBufferPointer(rebasing: bytes[start..<end]), endsLine: true))
                    start = lineFeed + 1
                } else {
                    var end = bytes.count
                    let holdsCarriageReturn = bytes[end - 1] == 0x0D
                    if holdsCarriageReturn { end -= 1 }
                    let open = piece(UnsafeBufferPointer(rebasing: bytes[start..<end]), endsLine: false)
                    if !open.isEmpty { emit(open) }
                    heldCarriageReturn = holdsCarriageReturn
                    start = bytes.count
                }
            }
        }
    }

    /// The input ended: the piece that ends a line left open (its held CR dropped), or nil.
    ///
    /// Thread rule: the numberer's thread.
    public mutating func finish() -> [UInt8]? {
        guard inLine else { return nil }
        inLine = false
        heldCarriageReturn = false
        return [0x0A] + prompt
    }

    /// `"N: "` when a line starts here, a CR held back from the last chunk, `bytes`, and `"\n"` plus the prompt when the line ends.
    private mutating func piece(_ bytes: UnsafeBufferPointer<UInt8>, endsLine: Bool) -> [UInt8] {
        let starts = !inLine
        if starts { number += 1 }
        let carriageReturn = heldCarriageReturn
        heldCarriageReturn = false
        inLine = !endsLine
        let number = self.number, prompt = self.prompt
        // One allocation of the exact size, filled in place.
        let size = (starts ? decimalLength(number) + 2 : 0) + (carriageReturn ? 1 : 0) + bytes.count + (endsLine ? 1 + prompt.count : 0)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var at = 0
            func put(_ byte: UInt8) {
                buffer[at] = byte
                at += 1
            }
            func put(_ bytes: UnsafeBufferPointer<UInt8>) {
                if let base = bytes.baseAddress, let target = buffer.baseAddress { (target + at).update(from: base, count: bytes.count) }
                at += bytes.count
            }
            if starts {
                var rest = number
                at = decimalLength(number)
                repeat {
                    at -= 1
                    buffer[at] = UInt8(truncatingIfNeeded: 0x30 + rest % 10)
                    rest /= 10
                } while rest > 0
                at = decimalLength(number)
                put(0x3A)  // ":"
                put(0x20)  // " "
            }
            if carriageReturn { put(0x0D) }
            put(bytes)
            if endsLine {
                put(0x0A)
                prompt.withUnsafeBufferPointer { put($0) }
            }
            count = at
        }
    }
}

/// How many decimal digits `value` (not negative) has.
private func decimalLength(_ value: Int) -> Int {
    var length = 1
    var rest = value
    while rest >= 10 {
        rest /= 10
        length += 1
    }
    return length
}

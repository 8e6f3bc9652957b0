/// Cuts a byte stream into length-prefixed frames: the framer of `frames(lengthPrefix:maxLength:)`.
///
/// A frame inside one chunk is lent out straight from it; one that straddles chunks is gathered
/// into an array reserved at its announced length, checked against `maxLength` first.
struct LengthPrefixDecoder: ByteFramer {
    private let prefix: LengthPrefix
    private let maxLength: Int

    /// Where the stream stands between two chunks.
    private enum State {
        /// Reading a prefix: `have` of its bytes arrived, accumulated in `length` (in arrival order).
        case prefix(have: Int, accumulated: UInt64)
        /// Reading a payload of `length` bytes into `payload`.
        case payload(length: Int)
    }

    private var state = State.prefix(have: 0, accumulated: 0)
    /// The payload of a frame that straddles chunks, gathered so far.
    private var payload: [UInt8] = []

    init(prefix: LengthPrefix, maxLength: Int) {
        precondition(maxLength >= 0, "checked by the operator")
        self.prefix = prefix
        self.maxLength = maxLength
    }

    mutating func next<Output: FramedOutput>(
        in chunk: UnsafeBufferPointer<UInt8>, at offset: inout Int, reusing spare: inout Output?
    ) -> FramerStep<Output> {
        guard let base = chunk.baseAddress else { return .needMore }
        let count = chunk.count
        while true {
            switch state {
            case .prefix(var have, var accumulated):
                while have < prefix.byteCount && offset < count {
                    accumulated = accumulated << 8 | UInt64(base[offset])
                    have += 1
                    offset += 1
                }
                guard have == prefix.byteCount else {
                    state = .prefix(have: have, accumulated: accumulated)
                    return .needMore
                }
                let length = Int(prefix.isBigEndian ? accumulated : byteSwapped(accumulated))
                if length > maxLength { return .failed(.frameTooLong(length: length, limit: maxLength)) }
                if count - offset >= length {
                    // The whole payload is in this chunk.
                    state = .prefix(have: 0, accumulated: 0)
                    let start = offset
                    offset += length
                    return .piece(Output(framed: .borrowed(UnsafeBufferPointer(start: base + start, count: length)), reusing: spare.take()))
                }
                state = .payload(length: length)
                payload.reserveCapacity(length)
            case .payload(let length):
                if offset == count { return .needMore }
                let taken = Swift.min(length - payload.count, count - offset)
                payload.append(contentsOf: UnsafeBufferPointer(start: base + offset, count: taken))
                offset += taken
                if payload.count == length {
                    let frame = payload
                    payload = []
                    state = .prefix(have: 0, accumulated: 0)
                    return .piece(Output(framed: .owned(frame), reusing: spare.take()))
                }
            }
        }
    }

    mutating func finish<Output: FramedOutput>() -> Result<Output?, FramingError> {
        switch state {
        case .prefix(have: 0, _):
            return .success(nil)
        case .prefix(let have, _):
            return .failure(.truncatedFrame(received: have, missing: prefix.byteCount - have, prefixComplete: false))
        case .payload(let length):
            return .failure(.truncatedFrame(received: prefix.byteCount + payload.count, missing: length - payload.count, prefixComplete: true))
        }
    }

    /// Never: frames are not cut at a byte.
    var singleByteCut: SingleByteCut? { nil }

    mutating func releaseBuffer() {
        payload = []
    }

    /// The prefix's bytes, read most significant first, turned around for a little-endian prefix.
    private func byteSwapped(_ accumulated: UInt64) -> UInt64 {
        var value = accumulated, swapped: UInt64 = 0
        for _ in 0..<prefix.byteCount {
            swapped = swapped << 8 | (value & 0xFF)
            value >>= 8
        }
        return swapped
    }
}

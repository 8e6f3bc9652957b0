/// Why a framing operator (`lines(maxLength:)`, `split(separator:maxLength:)`,
/// `frames(lengthPrefix:maxLength:)`) ended its signal, or why a frame could not be encoded.
///
/// Each is a peer's (or a program's) bad input, sent as the signal's error; the source is
/// disposed at once, and the operator never buffered much more than `maxLength` bytes.
///
/// ```swift
/// connection.bytes.lines().subscribe(next: handle, error: { error in
///     if case FramingError.lineTooLong(let limit)? = error as? FramingError { print("over \(limit) bytes") }
/// })
/// ```
///
/// Thread rule: a value type; safe from any thread.
public enum FramingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A line (`lines`), or a piece between separators (`split`), longer than `limit` bytes.
    ///
    /// Sent as soon as the bytes received prove it, without waiting for the terminator.
    case lineTooLong(limit: Int)
    /// A length prefix announced a frame of `length` bytes, more than `limit`
    /// (`frames`: its `maxLength`; `LengthPrefix.frame(_:)`: the most the prefix can state).
    case frameTooLong(length: Int, limit: Int)
    /// The signal completed inside a length-prefixed frame.
    ///
    /// `received` counts the unfinished frame's bytes, prefix included; `missing` how many more
    /// were needed, or, when the prefix itself was incomplete, only the prefix's missing bytes.
    case truncatedFrame(received: Int, missing: Int, prefixComplete: Bool)

    /// A sentence saying what went wrong: `"a line longer than 65536 bytes (the limit)"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .lineTooLong(let limit):
            return "a line longer than \(limit) bytes (the limit); the signal ended before buffering more"
        case .frameTooLong(let length, let limit):
            return "a frame of \(length) bytes, longer than the limit of \(limit) bytes"
        case .truncatedFrame(let received, let missing, let prefixComplete):
            if prefixComplete {
                return "the bytes ended inside a length-prefixed frame: \(missing) bytes missing (\(received) of \(received + missing) received)"
            }
            return "the bytes ended inside a frame's length prefix: at least \(missing) bytes missing (\(received) of the prefix received)"
        }
    }
}

/// How a frame's length is written before its payload: width and byte order of an unsigned integer.
///
/// The length counts the payload only, not the prefix. Decode with
/// `Signal.frames(lengthPrefix:maxLength:)`; encode a frame to send with `frame(_:)`:
///
/// ```swift
/// connection.send(try LengthPrefix.uint32BigEndian.frame(Array("hello".utf8)))
/// connection.bytes.frames(lengthPrefix: .uint32BigEndian).subscribeNext { payload in ... }
/// ```
///
/// Thread rule: a value type; safe from any thread.
public struct LengthPrefix: Sendable, Hashable, CustomStringConvertible {
    /// How many bytes the prefix takes: 1, 2 or 4.
    ///
    /// Thread rule: safe from any thread.
    public let byteCount: Int
    /// Whether the most significant byte comes first (network byte order).
    ///
    /// Thread rule: safe from any thread.
    public let isBigEndian: Bool

    private init(byteCount: Int, isBigEndian: Bool) {
        self.byteCount = byteCount
        self.isBigEndian = isBigEndian
    }

    /// One byte: payloads of up to 255 bytes.
    ///
    /// Thread rule: safe from any thread.
    public static let uint8 = LengthPrefix(byteCount: 1, isBigEndian: true)
    /// Two bytes, most significant first: payloads of up to 65,535 bytes.
    ///
    /// Thread rule: safe from any thread.
    public static let uint16BigEndian = LengthPrefix(byteCount: 2, isBigEndian: true)
    /// Two bytes, least significant first: payloads of up to 65,535 bytes.
    ///
    /// Thread rule: safe from any thread.
    public static let uint16LittleEndian = LengthPrefix(byteCount: 2, isBigEndian: false)
    /// Four bytes, most significant first (network byte order): payloads of up to 4 GiB - 1.
    ///
    /// Thread rule: safe from any thread.
    public static let uint32BigEndian = LengthPrefix(byteCount: 4, isBigEndian: true)
    /// Four bytes, least significant first: payloads of up to 4 GiB - 1.
    ///
    /// Thread rule: safe from any thread.
    public static let uint32LittleEndian = LengthPrefix(byteCount: 4, isBigEndian: false)

    /// The longest payload the prefix can state: 255, 65,535 or 4,294,967,295 bytes.
    ///
    /// Thread rule: safe from any thread.
    public var maxPayloadLength: Int { (1 << (8 * byteCount)) - 1 }

    /// `"uint32BigEndian"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        byteCount == 1 ? "uint8" : "uint\(8 * byteCount)\(isBigEndian ? "BigEndian" : "LittleEndian")"
    }

    /// The frame to send for `payload`: its length in this prefix, then the payload.
    ///
    /// - Parameter payload: The frame's contents.
    /// - Returns: `byteCount + payload.count` bytes.
    /// - Throws: `FramingError.frameTooLong` when the payload is longer than the prefix can state
    ///   (`maxPayloadLength`), rather than writing a wrong length.
    ///
    /// Thread rule: safe from any thread.
    public func frame(_ payload: [UInt8]) throws(FramingError) -> [UInt8] {
        let length = payload.count
        guard length <= maxPayloadLength else {
            throw FramingError.frameTooLong(length: length, limit: maxPayloadLength)
        }
        var framed: [UInt8] = []
        framed.reserveCapacity(byteCount + length)
        for index in 0..<byteCount {
            let shift = 8 * (isBigEndian ? byteCount - 1 - index : index)
            framed.append(UInt8(truncatingIfNeeded: length >> shift))
        }
        framed.append(contentsOf: payload)
        return framed
    }
}

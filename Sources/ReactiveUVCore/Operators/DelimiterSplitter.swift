import CReactiveUVByteScan
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A piece of a byte stream that a framer found, handed to the operator to send.
///
/// `borrowed` points into the chunk being fed (or the framer's own buffer) and is valid only
/// during the call, so a piece is made straight from the chunk; `owned` is an array given away.
enum FramedBytes {
    case borrowed(UnsafeBufferPointer<UInt8>)
    case owned([UInt8])
}

/// What a framer found next in a chunk.
enum FramerStep<Output> {
    /// A complete piece, made into the operator's output (the framer's state already moved past it).
    case piece(Output)
    /// The chunk is used up (its unfinished tail kept by the framer): feed the next one.
    case needMore
    /// The bytes prove an error that ends the stream.
    case failed(FramingError)
}

/// The work of one framing operator for one subscription: chunks in, pieces out, one at a time.
///
/// `FramingDriver` asks for the next piece from `offset` until the framer needs more, then for
/// the end. The framer moves past a piece before it is sent, so a re-entrant send finds it
/// ready to go on.
protocol ByteFramer {
    /// The next piece in `chunk` from `offset` (moved past what was used), or `.needMore` once the chunk is used up.
    ///
    /// A piece is made with `Output(framed:reusing: spare.take())`, which may take the spare's storage.
    mutating func next<Output: FramedOutput>(
        in chunk: UnsafeBufferPointer<UInt8>, at offset: inout Int, reusing spare: inout Output?
    ) -> FramerStep<Output>
    /// The source completed: the last piece (nil when there is none), or why the stream cannot end well.
    mutating func finish<Output: FramedOutput>() -> Result<Output?, FramingError>
    /// Frees the buffered bytes (the stream ended, or failed).
    mutating func releaseBuffer()
    /// When the framer cuts at one byte and holds no unfinished piece: how the driver finds the
    /// pieces wholly inside a chunk in a tight loop of its own; else nil.
    var singleByteCut: SingleByteCut? { get }
}

/// Finds, one after another, the pieces wholly inside a chunk that end at one separator byte
/// (`lines`, one-byte `split`). The separators' offsets are found many at a time
/// (`reactiveuv_find_byte`), since a `memchr` call per short line costs as much as its search.
/// The offsets go to a buffer on the driver loop's stack, so a nested call scans on its own.
/// What is left (no separator, a piece too long) goes back to the framer's `next`.
struct SingleByteCut {
    let separator: UInt8
    /// The longest piece the framer accepts: a longer one is left to `next`, which fails the stream.
    let maxLength: Int
    let dropsCarriageReturn: Bool
    /// `maxLength`, or less for a huge one: a piece at most this long is sent at once; a longer
    /// one (or the sentinel, always further) takes the slow path.
    private let fastLimit: Int
    /// Separator offsets found and not yet cut at: `found[nextFound..<foundCount]`, each from
    /// `foundBase`, then `Self.sentinel`.
    private var found: UnsafeMutablePointer<Int32>?
    private var nextFound = 0
    private var foundCount = 0
    private var foundBase = 0
    /// How far the chunk was searched: every separator before it is in `found`, or was cut at.
    private var scanned = 0

    /// How many offsets the buffer of `start(at:into:)` holds, the sentinel included: small
    /// enough that the temporary allocation stays on the stack without asking the runtime.
    static let foundCapacity = 256

    /// What follows the last offset found: so far from `foundBase` that a piece ending there is
    /// longer than `fastLimit`, so the fast path needs no count check.
    private static let sentinel = Int32.max

    init(separator: UInt8, maxLength: Int, dropsCarriageReturn: Bool) {
        self.separator = separator
        self.maxLength = maxLength
        self.dropsCarriageReturn = dropsCarriageReturn
        fastLimit = min(maxLength, Int(Self.sentinel) - Int(REACTIVEUV_FIND_BYTE_SPAN) - 1)
    }

    /// Begins at `offset` of a chunk (the next piece starts there), keeping the offsets it finds in
    /// `found` (`foundCapacity` of them), which must outlive the cut.
    @inline(__always)
    package mutating func start(at offset: Int, into found: UnsafeMutablePointer<Int32>) {
        self.found = found
        found[0] = Self.sentinel
        nextFound = 0
        foundCount = 0
        foundBase = offset
        scanned = offset
    }

    /// The next piece from `offset` to the first separator: its length (without the separator,
    /// nor a CR when `dropsCarriageReturn`) and the offset after the separator; nil when no
    /// separator lies there or the piece is too long. The same chunk on every call.
    @inline(__always)
    mutating func piece(in base: UnsafePointer<UInt8>, from offset: Int, count: Int) -> (length: Int, next: Int)? {
        let found = self.found.unsafelyUnwrapped  // set by `start(at:into:)`
        while true {
            // In 64 bits, so the sentinel's end cannot wrap where `Int` has 32; a real end is below `count`.
            let farEnd = Int64(foundBase) &+ Int64(found[nextFound])
            let end = Int(truncatingIfNeeded: farEnd)
            nextFound &+= 1
            if _fastPath(farEnd &- Int64(offset) <= Int64(fastLimit)) {
                return (DelimiterSplitter.length(from: offset, to: end, in: base, droppingCarriageReturn: dropsCarriageReturn), end &+ 1)
            }
            if nextFound <= foundCount {
                // A separator far away: the piece is sent if it is not too long once its CR is dropped.
                let length = DelimiterSplitter.length(from: offset, to: end, in: base, droppingCarriageReturn: dropsCarriageReturn)
                return length <= maxLength ? (length, end &+ 1) : nil
            }
            // The sentinel: every offset found was cut at; search on, or the chunk has no more.
            if scanned >= count { return nil }
            foundBase = scanned
            foundCount = reactiveuv_find_byte(base, scanned, count, separator, found, Self.foundCapacity - 1, &scanned)
            found[foundCount] = Self.sentinel
            nextFound = 0
        }
    }
}

/// Splits a byte stream at a separator: the framer of `split(separator:maxLength:)` and `lines(maxLength:)`.
///
/// Pieces inside one chunk are made straight from it (found with `memchr`, or by the driver
/// with `SingleByteCut`); only the unfinished piece at a chunk's end is copied into `pending`.
/// Past `pendingLimit` the piece is too long whatever follows, and the stream fails at once.
struct DelimiterSplitter: ByteFramer {
    /// The bytes that end a piece; never empty.
    private let separator: [UInt8]
    /// The separator's first byte (what `memchr` looks for).
    private let separatorHead: UInt8
    /// `separator.count`, kept so the per-piece path reads no array.
    private let separatorWidth: Int
    /// The longest piece sent.
    private let maxLength: Int
    /// Whether a CR at the end of a piece is removed (`lines`: CRLF ends a line too).
    private let dropsCarriageReturn: Bool
    /// The most `pending` may hold: `maxLength`, plus a CR that may yet be dropped, plus all but one
    /// byte of a separator whose end has not arrived (saturating).
    private let pendingLimit: Int
    /// The unfinished piece carried from one chunk to the next.
    private var pending: [UInt8] = []

    /// Pending buffers at most this large keep their storage between pieces; larger ones give it back.
    private static let keptCapacity = 4_096

    init(separator: [UInt8], maxLength: Int, dropsCarriageReturn: Bool) {
        precondition(!separator.isEmpty && maxLength > 0, "checked by the operator")
        self.separator = separator
        self.separatorHead = separator[0]
        self.separatorWidth = separator.count
        self.maxLength = maxLength
        self.dropsCarriageReturn = dropsCarriageReturn
        let slack = separator.count - 1 + (dropsCarriageReturn ? 1 : 0)
        self.pendingLimit = maxLength > Int.max - slack ? Int.max : maxLength + slack
    }

    @inline(__always)  // into the driver's loop
    mutating func next<Output: FramedOutput>(
        in chunk: UnsafeBufferPointer<UInt8>, at offset: inout Int, reusing spare: inout Output?
    ) -> FramerStep<Output> {
        guard let base = chunk.baseAddress, offset < chunk.count else { return .needMore }
        let count = chunk.count
        if _fastPath(pending.isEmpty) {
            // The common case: a piece that lies wholly inside the chunk, made straight from it.
            if let end = findSeparator(base, from: offset, count: count) {
                let start = offset
                let length = Self.length(from: start, to: end, in: base, droppingCarriageReturn: dropsCarriageReturn)
                if length > maxLength { return .failed(.lineTooLong(limit: maxLength)) }
                offset = end + separatorWidth
                return .piece(Output(framed: .borrowed(UnsafeBufferPointer(start: base + start, count: length)), reusing: spare.take()))
            }
            let rest = count - offset
            if rest > pendingLimit { return .failed(.lineTooLong(limit: maxLength)) }
            pending.append(contentsOf: UnsafeBufferPointer(start: base + offset, count: rest))
            offset = count
            return .needMore
        }
        // The piece begun in an earlier chunk ends here, or the rest of the chunk joins it.
        if let taken = separatorStraddling(into: chunk, at: offset) {
            pending.removeLast(separatorWidth - taken)
            offset += taken
            return takePending(reusing: &spare)
        }
        if let end = findSeparator(base, from: offset, count: count) {
            if pending.count > pendingLimit - (end - offset) { return .failed(.lineTooLong(limit: maxLength)) }
            pending.append(contentsOf: UnsafeBufferPointer(start: base + offset, count: end - offset))
            offset = end + separatorWidth
            return takePending(reusing: &spare)
        }
        if pending.count > pendingLimit - (count - offset) { return .failed(.lineTooLong(limit: maxLength)) }
        pending.append(contentsOf: UnsafeBufferPointer(start: base + offset, count: count - offset))
        offset = count
        return .needMore
    }

    var singleByteCut: SingleByteCut? {
        guard separatorWidth == 1 && pending.isEmpty else { return nil }
        return SingleByteCut(separator: separatorHead, maxLength: maxLength, dropsCarriageReturn: dropsCarriageReturn)
    }

    /// The length of the piece `base[start..<end]` (`end` where its separator starts), without a CR
    /// that ends it when `dropsCarriageReturn`.
    @inline(__always)
    static func length(from start: Int, to end: Int, in base: UnsafePointer<UInt8>, droppingCarriageReturn dropsCarriageReturn: Bool) -> Int {
        let length = end &- start
        if dropsCarriageReturn && length > 0 && base[end &- 1] == UInt8(ascii: "\r") { return length &- 1 }
        return length
    }

    mutating func finish<Output: FramedOutput>() -> Result<Output?, FramingError> {
        // A last piece without its separator is still a piece (a file's last line without "\n").
        if pending.isEmpty { return .success(nil) }
        var noSpare: Output?
        switch takePending(reusing: &noSpare) {
        case .piece(let piece): return .success(piece)
        case .failed(let error): return .failure(error)
        case .needMore: return .success(nil)
        }
    }

    mutating func releaseBuffer() {
        pending = []
    }

    /// `pending` as one piece (after dropping its CR, if asked); `pending` is empty after.
    private mutating func takePending<Output: FramedOutput>(reusing spare: inout Output?) -> FramerStep<Output> {
        if dropsCarriageReturn && pending.last == UInt8(ascii: "\r") { pending.removeLast() }
        if pending.count > maxLength { return .failed(.lineTooLong(limit: maxLength)) }
        let piece = pending.withUnsafeBufferPointer { Output(framed: .borrowed($0), reusing: spare.take()) }
        pending.removeAll(keepingCapacity: pending.capacity <= DelimiterSplitter.keptCapacity)
        return .piece(piece)
    }

    /// The offset of the first separator in `base[from..<count]`, if one lies wholly inside it.
    ///
    /// `mutating` although it changes nothing: a non-mutating call, inlined, copied the struct per piece.
    @inline(__always)
    private mutating func findSeparator(_ base: UnsafePointer<UInt8>, from: Int, count: Int) -> Int? {
        guard let found = memchr(base + from, Int32(separatorHead), count - from) else { return nil }
        let offset = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
        if _fastPath(separatorWidth == 1) { return offset }
        return findWideSeparator(base, at: offset, count: count)
    }

    /// `findSeparator` for a separator of several bytes, from `offset`, where its first byte is.
    private func findWideSeparator(_ base: UnsafePointer<UInt8>, at first: Int, count: Int) -> Int? {
        var offset = first
        while true {
            if offset + separatorWidth > count { return nil }  // its end is in the next chunk: `pending` keeps it
            var matches = true
            for index in 1..<separatorWidth where base[offset + index] != separator[index] {
                matches = false
                break
            }
            if matches { return offset }
            let position = offset + 1
            guard let found = memchr(base + position, Int32(separatorHead), count - position) else { return nil }
            offset = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
        }
    }

    /// For a separator of several bytes: how many of its bytes open `chunk` (from `offset`) when the
    /// rest of it ends `pending` (the earliest such separator), or nil.
    ///
    /// `pending` holds no whole separator, so one that starts in it comes before any in the chunk.
    private func separatorStraddling(into chunk: UnsafeBufferPointer<UInt8>, at offset: Int) -> Int? {
        let width = separatorWidth
        guard width > 1 else { return nil }
        // `inPending` bytes of the separator end `pending`; the other `width - inPending` open the chunk.
        for inPending in stride(from: min(width - 1, pending.count), through: 1, by: -1) {
            let inChunk = width - inPending
            guard inChunk <= chunk.count - offset else { continue }
            var matches = true
            for index in 0..<inPending where pending[pending.count - inPending + index] != separator[index] {
                matches = false
                break
            }
            if !matches { continue }
            for index in 0..<inChunk where chunk[offset + index] != separator[inPending + index] {
                matches = false
                break
            }
            if matches { return inChunk }
        }
        return nil
    }
}

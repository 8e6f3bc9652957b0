import CReactiveUVByteScan

/// Operators that cut byte signals into the messages they carry: `lines`,
/// `utf8Lines`, `split(separator:maxLength:)` and `frames(lengthPrefix:maxLength:)`.
///
/// They apply to any `Signal<[UInt8]>`, the one chunk type of the library's
/// byte sources: `TCPConnection.bytes`, `Files.chunks` (a file, a FIFO,
/// `/dev/stdin`), and a child's output once picked out of `ChildProcess.run`:
///
/// ```swift
/// ChildProcess.run("git", arguments: ["log", "--oneline"])
///     .compactMap { output in if case .standardOutput(let bytes) = output { bytes } else { nil } }
///     .utf8Lines()
/// ```
///
/// All are fused (`fuse`): one piece of state per subscription on its home
/// thread, no lock, and the source's subscription is the operator's, so
/// disposal reaches the source and a source that can pause (a TCP
/// connection) can still be paused by the consumer (`values`). The work is in
/// a framer per operator (`DelimiterSplitter`, `LengthPrefixDecoder`) that
/// `FramingDriver` feeds; a piece that lies inside one chunk costs at most one
/// allocation, the piece's own: none for a `String` line of up to 15 bytes, and
/// none for a `[UInt8]` piece written into the storage of the one sent before,
/// which the subscriber let go of.
///
/// Every operator bounds its memory: a piece longer than `maxLength` ends the
/// signal with a `FramingError` as soon as the bytes prove it, and the source is
/// disposed. A `maxLength` that is not positive (or an empty separator) ends
/// the signal at once with a `UVError` (`EINVAL`), without subscribing.
extension Signal where Value == [UInt8] {
    /// The default `maxLength` of `lines` and `split`: 64 KiB.
    ///
    /// Thread rule: safe from any thread.
    public static var defaultMaxLineLength: Int { 64 * 1024 }

    /// The default `maxLength` of `frames`: 1 MiB.
    ///
    /// Thread rule: safe from any thread.
    public static var defaultMaxFrameLength: Int { 1 << 20 }

    /// Splits the bytes into lines, each sent without its terminator.
    ///
    /// A line ends at LF; a CR right before the LF is removed too (CRLF). A
    /// final line without LF is sent when the signal completes (its CR, if it
    /// ends with one, removed as well); an empty final piece is not a line, so
    /// `"a\n"` is one line and `"a\n\n"` two (the second empty). A terminator
    /// split across chunks (`"\r"` | `"\n"`) is handled.
    ///
    /// A line longer than `maxLength` bytes (terminator not counted) ends the
    /// signal with `FramingError.lineTooLong(limit:)` as soon as that many bytes
    /// arrived without an LF, and disposes the source: a peer that never sends
    /// a newline costs at most about `maxLength` bytes. The lines before it are
    /// sent. Lines are bytes: use `utf8Lines(maxLength:)` for `String`s.
    ///
    /// Each line is an array of its own; a subscriber that lets go of a line
    /// (does not keep it past its `next`) lets the next line of about its
    /// length reuse its storage, so such a pipeline allocates nothing per line.
    ///
    /// RAC, Rx, Combine: none (Foundation: `AsyncSequence.lines`; NIO: `LineBasedFrameDecoder`).
    ///
    /// - Parameter maxLength: The longest line accepted, in bytes; must be positive.
    /// - Returns: A signal of lines; errors and completion pass through (after the last line).
    ///
    /// Thread rule: safe from any thread.
    public func lines(maxLength: Int = defaultMaxLineLength) -> Signal<[UInt8]> {
        framed(separator: [UInt8(ascii: "\n")], maxLength: maxLength, dropsCarriageReturn: true, operation: "Signal.lines(maxLength:)")
            .debugNamed("[\(name)] -lines: \(maxLength)")
    }

    /// `lines(maxLength:)` decoded as UTF-8: each line as a `String`.
    ///
    /// Bytes that are not valid UTF-8 become U+FFFD (the replacement
    /// character), as `String(decoding:as:)` does: a peer sending garbage gets
    /// garbage lines, never a crash. Everything else is `lines(maxLength:)`'s
    /// (`maxLength` counts bytes, not characters).
    ///
    /// - Parameter maxLength: The longest line accepted, in bytes; must be positive.
    /// - Returns: A signal of lines as strings.
    ///
    /// Thread rule: safe from any thread.
    public func utf8Lines(maxLength: Int = defaultMaxLineLength) -> Signal<String> {
        framed(separator: [UInt8(ascii: "\n")], maxLength: maxLength, dropsCarriageReturn: true, operation: "Signal.utf8Lines(maxLength:)")
            .debugNamed("[\(name)] -utf8Lines: \(maxLength)")
    }

    /// Splits the bytes at every occurrence of `separator`, each piece sent without it.
    ///
    /// Every separator ends a piece, so two in a row send an empty piece; what
    /// follows the last separator is sent at completion when it is not empty.
    /// A separator split across chunks is found.
    ///
    /// A piece longer than `maxLength` bytes ends the signal with
    /// `FramingError.lineTooLong(limit:)` as soon as the bytes prove it, and
    /// disposes the source. `lines(maxLength:)` is this with `"\n"`, removing a CR before it.
    ///
    /// - Parameters:
    ///   - separator: The byte that ends a piece.
    ///   - maxLength: The longest piece accepted, in bytes; must be positive.
    /// - Returns: A signal of pieces.
    ///
    /// Thread rule: safe from any thread.
    public func split(separator: UInt8, maxLength: Int = defaultMaxLineLength) -> Signal<[UInt8]> {
        split(separator: [separator], maxLength: maxLength)
    }

    /// Splits the bytes at every occurrence of a separator of several bytes (`"\r\n\r\n"`, a NUL pair).
    ///
    /// As `split(separator:maxLength:)` with one byte: the earliest occurrence
    /// ends a piece, and the search goes on after it (so in `"aaa"` split at
    /// `"aa"` the piece is `""`, then `"a"` at completion). An empty separator ends
    /// the signal at once with a `UVError` (`EINVAL`).
    ///
    /// - Parameters:
    ///   - separator: The bytes that end a piece; not empty.
    ///   - maxLength: The longest piece accepted, in bytes; must be positive.
    /// - Returns: A signal of pieces.
    ///
    /// Thread rule: safe from any thread.
    public func split(separator: [UInt8], maxLength: Int = defaultMaxLineLength) -> Signal<[UInt8]> {
        guard !separator.isEmpty else {
            return .invalidArgument("split separator must not be empty", in: "Signal.split(separator:maxLength:)")
        }
        return framed(separator: separator, maxLength: maxLength, dropsCarriageReturn: false, operation: "Signal.split(separator:maxLength:)")
            .debugNamed("[\(name)] -split: \(separator) maxLength: \(maxLength)")
    }

    /// Cuts the bytes into length-prefixed frames, each sent as its payload (the prefix removed).
    ///
    /// Each frame is a length in `lengthPrefix`'s width and byte order, then
    /// that many bytes; a frame may be empty. A prefix announcing more than
    /// `maxLength` bytes ends the signal at once with
    /// `FramingError.frameTooLong(length:limit:)`, before anything is allocated
    /// for it. A signal that completes inside a frame (its prefix or its
    /// payload) ends with `FramingError.truncatedFrame(received:missing:prefixComplete:)`
    /// instead of completing, saying how many bytes were missing. Build
    /// frames to send with `LengthPrefix.frame(_:)`.
    ///
    /// - Parameters:
    ///   - lengthPrefix: How the length is written (`.uint32BigEndian`, `.uint16BigEndian`, `.uint8`, ...).
    ///   - maxLength: The longest payload accepted, in bytes; must be positive.
    /// - Returns: A signal of payloads.
    ///
    /// Thread rule: safe from any thread.
    public func frames(lengthPrefix: LengthPrefix, maxLength: Int = defaultMaxFrameLength) -> Signal<[UInt8]> {
        guard maxLength > 0 else {
            return .invalidArgument("maxLength must be positive, got \(maxLength)", in: "Signal.frames(lengthPrefix:maxLength:)")
        }
        return fuseBursting { downstream, downstreamNext, sink, subscription in
            FramingDriver<LengthPrefixDecoder, [UInt8]>(
                LengthPrefixDecoder(prefix: lengthPrefix, maxLength: maxLength),
                downstream: downstream, downstreamNext: downstreamNext, sink: sink, subscription: subscription
            ).observer(valueShortcut: downstreamNext != nil)
        }.debugNamed("[\(name)] -frames: \(lengthPrefix) maxLength: \(maxLength)")
    }

    /// The one way through for `lines`, `utf8Lines` and `split`: a `DelimiterSplitter` per subscription.
    private func framed<Output: FramedOutput>(
        separator: [UInt8], maxLength: Int, dropsCarriageReturn: Bool, operation: String
    ) -> Signal<Output> {
        guard maxLength > 0 else {
            return .invalidArgument("maxLength must be positive, got \(maxLength)", in: operation)
        }
        return fuseBursting { downstream, downstreamNext, sink, subscription in
            let splitter = DelimiterSplitter(separator: separator, maxLength: maxLength, dropsCarriageReturn: dropsCarriageReturn)
            return FramingDriver<DelimiterSplitter, Output>(
                splitter, downstream: downstream, downstreamNext: downstreamNext, sink: sink, subscription: subscription
            ).observer(valueShortcut: downstreamNext != nil)
        }
    }
}

/// What a framing operator sends: made from the bytes of one piece.
protocol FramedOutput: Sendable {
    /// Whether the driver keeps this piece, once sent, for the next piece to reuse (`spare`): only
    /// small ones, so an idle subscription holds at most a few KiB (a 1 MiB frame is let go at once).
    var isWorthKeeping: Bool { get }
    /// The piece made of `framed`; it may take `spare`'s storage (written in place when no one else
    /// holds it), else lets `spare` go.
    ///
    /// `spare` is consumed, not `inout`: the caller's variable is known empty afterwards, so storing
    /// the next spare into it releases nothing.
    init(framed: FramedBytes, reusing spare: consuming Self?)
}

extension Array: FramedOutput where Element == UInt8 {
    /// The most storage a spare piece holds: as `DelimiterSplitter`'s pending buffer keeps.
    static var keptCapacity: Int { 4_096 }

    var isWorthKeeping: Bool { capacity <= Self.keptCapacity }

    /// Whether storage of `capacity` fits a piece of `count` bytes closely: it holds it, with at most
    /// an eighth and 16 bytes over (one unsigned comparison: a capacity below `count` wraps around).
    @inline(__always)
    static func fitsClosely(_ count: Int, capacity: Int) -> Bool {
        UInt(bitPattern: capacity &- count) <= UInt(bitPattern: 16 &+ count >> 3)
    }

    /// `storage` with `count` elements: the last ones removed, or zeros appended (then overwritten).
    @inline(never)
    static func resized(_ storage: consuming [UInt8], to count: Int) -> [UInt8] {
        var storage = storage
        let difference = storage.count &- count
        if difference > 0 {
            storage.removeLast(difference)
        } else {
            storage.append(contentsOf: repeatElement(0, count: -difference))
        }
        return storage
    }

    /// A borrowed piece is copied into `spare`'s storage when its capacity fits the piece closely
    /// (at most an eighth and 16 bytes over: about what malloc rounds up anyway), else into a new
    /// array of the exact size.
    ///
    /// `spare` is the piece sent before: when the subscriber let it go, its storage is unique and
    /// the piece is written in place (its count set first, only when it differs, then one memcpy),
    /// with no allocation; when the subscriber kept it, copy-on-write gives the piece storage of its
    /// own (one allocation, as without `spare`, plus a copy of the kept bytes that the piece then
    /// overwrites), and the kept line is never touched.
    @inline(__always)
    init(framed: FramedBytes, reusing spare: consuming [UInt8]?) {
        switch framed {
        case .owned(let bytes):
            self = bytes
        case .borrowed(let bytes):
            let count = bytes.count
            // A spare of the piece's very count was made (or reused) for that count: it fits as a new one would.
            if var storage = consume spare, storage.count == count || Self.fitsClosely(count, capacity: storage.capacity) {
                // Lines of a stream are mostly of one length: the count changes only when it differs,
                // out of line (so `storage` is not kept in memory for the calls that change it).
                if _slowPath(storage.count != count) { storage = Self.resized(storage, to: count) }
                // Unique (the subscriber let it go): written in place; else copied first (copy on write).
                // Inline for a short piece (`reactiveuv_copy_bytes`), not a call to `memcpy`.
                storage.withUnsafeMutableBufferPointer { target in
                    if let source = bytes.baseAddress, let destination = target.baseAddress {
                        reactiveuv_copy_bytes(destination, source, count)
                    }
                }
                self = storage
                return
            }
            self.init(unsafeUninitializedCapacity: count) { buffer, initialized in
                if let source = bytes.baseAddress, let target = buffer.baseAddress {
                    target.initialize(from: source, count: count)
                }
                initialized = count
            }
        }
    }
}

extension String: FramedOutput {
    /// Never: a `String`'s storage cannot be written in place.
    var isWorthKeeping: Bool { false }

    init(framed: FramedBytes, reusing spare: consuming String?) {
        switch framed {
        case .borrowed(let bytes): self.init(decoding: bytes, as: UTF8.self)
        case .owned(let bytes): self.init(decoding: bytes, as: UTF8.self)
        }
    }
}

/// Runs one framer for one subscription: hands it the chunks, sends its pieces, ends the stream.
///
/// Re-entrancy: a downstream that makes the source send again while a chunk is
/// being cut (a subscriber feeding the subject it reads from) is delivered
/// depth first, as everywhere in the library, but a byte stream cannot be cut
/// depth first: the new bytes come after the rest of the current chunk. So
/// every event goes through a queue, and whichever call is innermost cuts the
/// rest of the current chunk, then the queued events, in order, before it
/// returns; the outer call then finds nothing left. The framer and `offset`
/// have moved past a piece before it is sent, so the inner call goes on where
/// the outer one stopped. A re-entrant completion is thus finished (last piece,
/// then `completed`) before the source's gate disposes the subscription.
final class FramingDriver<Framer: ByteFramer, Output: FramedOutput> {
    // Every stored var is touched only on the subscription's home thread, one event at a time
    // or nested in one (see above); `@exclusivity(unchecked)` as `OperatorVar`.
    @exclusivity(unchecked) private var framer: Framer
    /// The chunk being cut, and how far.
    @exclusivity(unchecked) private var current: [UInt8]?
    @exclusivity(unchecked) private var offset = 0
    /// The piece sent last, whose storage the next piece may reuse (`FramedOutput.isWorthKeeping`).
    @exclusivity(unchecked) private var spare: Output?
    /// Events that arrived while a chunk was being cut.
    @exclusivity(unchecked) private var queued = RingBuffer<Event<[UInt8]>>()
    /// A terminal event went out (or is going out), or the subscription was disposed meanwhile.
    @exclusivity(unchecked) private var isDone = false
    private let downstream: (Event<Output>) -> Void
    /// The downstream's value shortcut, when it has one: a piece is sent without building its event.
    private let downstreamNext: ((Output) -> Void)?
    /// The subscription's own sink, when it is the downstream (`fuseBursting`): a piece is handed to
    /// it inside the drain's delivery, without the closure and the handshake per piece.
    private let sink: Sink<Output>?
    private let subscription: Subscription

    init(_ framer: Framer, downstream: @escaping (Event<Output>) -> Void, downstreamNext: ((Output) -> Void)?,
         sink: Sink<Output>? = nil, subscription: Subscription) {
        self.framer = framer
        self.downstream = downstream
        self.downstreamNext = downstreamNext
        self.sink = sink
        self.subscription = subscription
    }

    /// Sends a piece, inside the drain's delivery: to the sink itself, else through the value
    /// shortcut, else as an event. `next?(piece)`, not `if let`: binding the closure would retain
    /// and release it per piece.
    @inline(__always)
    private static func send(
        _ piece: Output, sink: Unmanaged<Sink<Output>>?, downstream: (Event<Output>) -> Void, downstreamNext: ((Output) -> Void)?
    ) {
        if let sink {
            // Unmanaged: the driver holds the sink (and its subscription the driver), so no retain per piece.
            sink._withUnsafeGuaranteedRef { $0.handleNextInBurst(piece) }
        } else if downstreamNext != nil {
            downstreamNext?(piece)
        } else {
            downstream(.next(piece))
        }
    }

    /// The operator's observer: every event through `receive`, and chunks through `receiveNext` too
    /// when the downstream has a value shortcut (`fuse`'s rule: a shortcut only when given one).
    func observer(valueShortcut: Bool) -> ClosureObserver<[UInt8]> {
        ClosureObserver(event: { event in self.receive(event) }, next: valueShortcut ? { chunk in self.receiveNext(chunk) } : nil)
    }

    func receive(_ event: Event<[UInt8]>) {
        if isDone { return }
        if current == nil && queued.isEmpty, case .next(let chunk) = event {
            current = chunk
            offset = 0
        } else {
            queued.append(event)
        }
        drain()
    }

    /// `receive(.next(chunk))`.
    func receiveNext(_ chunk: [UInt8]) {
        if isDone { return }
        if current == nil && queued.isEmpty {
            current = chunk
            offset = 0
        } else {
            queued.append(.next(chunk))
        }
        drain()
    }

    /// Cuts the current chunk, then each queued event, until nothing is left or the stream ended.
    ///
    /// The whole drain is one delivery for the dispose handshake (`DeliveryHandshake.enterDelivery`): the
    /// pieces of a chunk are sent as a burst, and a sink on the same subscription joins it instead
    /// of publishing its thread (a sequentially consistent store) per piece. `disposeAndWait()`
    /// from another thread then waits for the burst, as for one callback.
    private func drain() {
        let entry = subscription.enterDelivery()
        if entry == .refused {
            end(nil)
            return
        }
        defer { subscription.leaveDelivery(entry) }
        while !isDone {
            if let chunk = current {
                // One retain of the chunk and of the downstream per chunk, not per piece.
                let downstream = self.downstream
                let downstreamNext = self.downstreamNext
                let sink = self.sink.map { Unmanaged.passUnretained($0) }
                chunk.withUnsafeBufferPointer { bytes in
                    while true {
                        if let cut = framer.singleByteCut,
                           cutInPlace(bytes, with: cut, sink: sink, downstream: downstream, downstreamNext: downstreamNext) {
                            return
                        }
                        // One step the framer's own way: a piece that straddles chunks, a frame, a
                        // failure, the chunk's tail.
                        switch framer.next(in: bytes, at: &offset, reusing: &spare) {
                        case .piece(let piece):
                            Self.send(piece, sink: sink, downstream: downstream, downstreamNext: downstreamNext)
                            if subscription.isDisposed {
                                end(nil)
                                return
                            }
                            // A nested call (an event sent from inside that delivery) cut the rest.
                            if isDone || current == nil { return }
                            // Kept for the next piece: unique again unless the subscriber kept this one.
                            spare = piece.isWorthKeeping ? consume piece : nil
                        case .needMore:
                            current = nil
                            return
                        case .failed(let error):
                            end(.error(error))
                            return
                        }
                    }
                }
                continue
            }
            guard let event = queued.popFirst() else { return }
            switch event {
            case .next(let chunk):
                current = chunk
                offset = 0
            case .error(let error):
                end(.error(error))
            case .completed:
                switch framer.finish() as Result<Output?, FramingError> {
                case .success(let last):
                    // Done first: events sent from inside the last piece's delivery are dropped.
                    isDone = true
                    if let last { downstream(.next(last)) }
                    end(.completed)
                case .failure(let error):
                    end(.error(error))
                }
            }
        }
    }

    /// The tight loop for a framer that cuts at one byte (`lines`): sends every piece that lies
    /// wholly inside the chunk from `offset`, found with `cut`, without a round trip through the
    /// framer per piece. Stops at the chunk's unfinished tail or at a piece that is too long, both
    /// left to the framer's `next` (which sees the same bytes); returns true when the drain of this
    /// chunk is over (a nested call cut the rest, the stream ended, or the subscription was disposed).
    ///
    /// The spare piece is held in a local for the loop, so the compiler sees it is empty once taken
    /// and storing the piece sent into it releases nothing. A nested call meanwhile finds no spare
    /// and makes its pieces anew.
    @inline(__always)
    private func cutInPlace(
        _ bytes: UnsafeBufferPointer<UInt8>, with cut: SingleByteCut,
        sink: Unmanaged<Sink<Output>>?, downstream: (Event<Output>) -> Void, downstreamNext: ((Output) -> Void)?
    ) -> Bool {
        // One loop per way of sending, so the loop to the sink keeps nothing else live across its calls.
        if let sink {
            // The sink's callback itself: `handleNextInBurst` is the disposed flag of this very
            // subscription, then the callback, and `cutPieces` reads that flag before every piece.
            return cutPieces(bytes, with: cut) { piece in sink._withUnsafeGuaranteedRef { $0.next?(piece) } }
        }
        return cutPieces(bytes, with: cut) { piece in Self.send(piece, sink: nil, downstream: downstream, downstreamNext: downstreamNext) }
    }

    /// `cutInPlace`'s loop, sending each piece with `send`. The separators' offsets are found
    /// into a buffer on this call's stack (`SingleByteCut.start(at:into:)`).
    @inline(__always)
    private func cutPieces(_ bytes: UnsafeBufferPointer<UInt8>, with cut: SingleByteCut, send: (Output) -> Void) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        return withUnsafeTemporaryAllocation(of: Int32.self, capacity: SingleByteCut.foundCapacity) { found in
            let count = bytes.count
            var position = offset
            var cut = cut
            cut.start(at: position, into: found.baseAddress.unsafelyUnwrapped)
            var spare = self.spare.take()
            while let (length, next) = cut.piece(in: base, from: position, count: count) {
                // Before every piece (so `send` need not): disposed from inside the delivery before,
                // or from another thread meanwhile.
                if subscription.isDisposed {
                    end(nil)
                    return true
                }
                // Past the piece before it is sent: a nested call goes on after it.
                offset = next
                let piece = Output(framed: .borrowed(UnsafeBufferPointer(start: base + position, count: length)), reusing: spare.take())
                send(piece)
                // A nested call (an event sent from inside that delivery) cut the rest, or ended the stream.
                if current == nil { return true }
                spare = piece.isWorthKeeping ? consume piece : nil
                position = next
            }
            // Disposed inside the last piece's delivery: nothing more is cut (nor an error sent).
            if subscription.isDisposed {
                end(nil)
                return true
            }
            self.spare = spare
            return false
        }
    }

    /// Stops for good: frees the buffered bytes and the queue, then sends the terminal event, if any.
    private func end(_ terminal: Event<Output>?) {
        isDone = true
        current = nil
        spare = nil
        framer.releaseBuffer()
        queued.removeAll()
        if let terminal { downstream(terminal) }
    }
}

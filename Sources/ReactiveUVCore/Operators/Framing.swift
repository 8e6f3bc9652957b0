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
/// All are fused: their state lives on the home thread with no lock, and they share the
/// source's subscription, so disposal reaches the source and a consumer can still pause it.
/// Each has a framer (`DelimiterSplitter`, `LengthPrefixDecoder`) that `FramingDriver` feeds.
///
/// Every operator bounds its memory: a piece longer than `maxLength` ends the signal with a
/// `FramingError` as soon as the bytes prove it, and the source is disposed. A `maxLength` that
/// is not positive (or an empty separator) ends the signal at once with a `UVError` (`EINVAL`).
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
    /// A line ends at LF; a CR right before it is removed too (CRLF), also across chunks. A final
    /// line without LF is sent at completion; an empty final piece is not a line, so `"a\n"` is
    /// one line and `"a\n\n"` two (the second empty).
    ///
    /// A line longer than `maxLength` bytes (terminator not counted) ends the signal with
    /// `FramingError.lineTooLong(limit:)` as soon as that many bytes arrived without an LF, after
    /// the lines before it, and disposes the source. Use `utf8Lines(maxLength:)` for `String`s.
    ///
    /// A subscriber that does not keep a line past its `next` lets the next line reuse its storage.
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
    /// Invalid UTF-8 becomes U+FFFD, as `String(decoding:as:)` does, never a crash. The rest is
    /// `lines(maxLength:)`'s (`maxLength` counts bytes).
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
    /// Every separator ends a piece (two in a row send an empty one); what follows the last is
    /// sent at completion when not empty. A piece longer than `maxLength` ends the signal with
    /// `FramingError.lineTooLong(limit:)` and disposes the source.
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
    /// The earliest occurrence ends a piece and the search goes on after it (`"aaa"` split at
    /// `"aa"` gives `""`, then `"a"` at completion). An empty separator ends the signal at once
    /// with a `UVError` (`EINVAL`).
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
    /// Each frame is a length in `lengthPrefix`'s width and byte order, then that many bytes (maybe
    /// none). A prefix announcing more than `maxLength` ends the signal at once with
    /// `FramingError.frameTooLong(length:limit:)`; a source that completes inside a frame ends it
    /// with `FramingError.truncatedFrame(received:missing:prefixComplete:)`. Build frames to send
    /// with `LengthPrefix.frame(_:)`.
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
    /// Whether the driver keeps this piece, once sent, for the next to reuse: only small ones, so
    /// an idle subscription does not hold a large frame.
    var isWorthKeeping: Bool { get }
    /// The piece made of `framed`, in `spare`'s storage when it fits. `spare` is consumed so the
    /// caller's variable is known empty afterwards.
    init(framed: FramedBytes, reusing spare: consuming Self?)
}

extension Array: FramedOutput where Element == UInt8 {
    /// The most storage a spare piece holds: as `DelimiterSplitter`'s pending buffer keeps.
    static var keptCapacity: Int { 4_096 }

    var isWorthKeeping: Bool { capacity <= Self.keptCapacity }

    /// Whether storage of `capacity` fits `count` bytes closely (a capacity below `count` wraps
    /// around in the unsigned comparison).
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

    /// A borrowed piece is copied into `spare`'s storage when it fits closely, else into a new
    /// array. `spare` is the piece sent before: written in place when the subscriber let it go,
    /// copied on write when it kept it, so a kept line is never touched.
    @inline(__always)
    init(framed: FramedBytes, reusing spare: consuming [UInt8]?) {
        switch framed {
        case .owned(let bytes):
            self = bytes
        case .borrowed(let bytes):
            let count = bytes.count
            // A spare of the piece's very count fits as a new array would.
            if var storage = consume spare, storage.count == count || Self.fitsClosely(count, capacity: storage.capacity) {
                // Lines are mostly of one length: resizing is the slow path, out of line.
                if _slowPath(storage.count != count) { storage = Self.resized(storage, to: count) }
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
/// Re-entrancy: a byte stream cannot be cut depth first, since bytes sent from inside a
/// delivery come after the rest of the current chunk. So events are queued, and the innermost
/// call cuts the rest of the chunk and the queue in order; the framer and `offset` move past a
/// piece before it is sent, so an inner call goes on where the outer one stopped.
final class FramingDriver<Framer: ByteFramer, Output: FramedOutput> {
    // Every stored var is touched only on the subscription's home thread, one event at a time
    // or nested in one; `@exclusivity(unchecked)` as `OperatorVar`.
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
    /// The chain's end when the subscription's own sink is the downstream (`fuseBursting`): pieces go
    /// to it inside the drain's one delivery.
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

    /// Sends a piece inside the drain's delivery: to the sink, else through the value shortcut,
    /// else as an event. `next?(piece)`, not `if let`, which would retain the closure per piece.
    @inline(__always)
    private static func send(
        _ piece: Output, sink: Unmanaged<Sink<Output>>?, downstream: (Event<Output>) -> Void, downstreamNext: ((Output) -> Void)?
    ) {
        if let sink {
            // Unmanaged: the driver holds the sink, so no retain per piece.
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
    /// The drain is one delivery for the dispose handshake, which the sink joins per piece.
    private func drain() {
        let entry = subscription.enterDelivery()
        if entry == .refused {
            end(nil)
            return
        }
        defer { subscription.leaveDelivery(entry) }
        while !isDone {
            if let chunk = current {
                // Retained once per chunk, not per piece.
                let downstream = self.downstream
                let downstreamNext = self.downstreamNext
                let sink = self.sink.map { Unmanaged.passUnretained($0) }
                chunk.withUnsafeBufferPointer { bytes in
                    while true {
                        if let cut = framer.singleByteCut,
                           cutInPlace(bytes, with: cut, sink: sink, downstream: downstream, downstreamNext: downstreamNext) {
                            return
                        }
                        // One step the framer's own way: a piece across chunks, a frame, a failure, the tail.
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

    /// The tight loop for a framer that cuts at one byte (`lines`): sends every piece wholly inside
    /// the chunk from `offset`, leaving the tail and a piece too long to the framer's `next`.
    /// Returns true when this chunk's drain is over (a nested call cut the rest, the stream ended,
    /// or the subscription was disposed). The spare is held in a local, so a nested call finds none.
    @inline(__always)
    private func cutInPlace(
        _ bytes: UnsafeBufferPointer<UInt8>, with cut: SingleByteCut,
        sink: Unmanaged<Sink<Output>>?, downstream: (Event<Output>) -> Void, downstreamNext: ((Output) -> Void)?
    ) -> Bool {
        // One loop per way of sending, so the loop to the sink keeps nothing else live across calls.
        if let sink {
            // The callback itself: `cutPieces` checks the disposed flag before every piece.
            return cutPieces(bytes, with: cut) { piece in sink._withUnsafeGuaranteedRef { $0.callNext(piece) } }
        }
        return cutPieces(bytes, with: cut) { piece in Self.send(piece, sink: nil, downstream: downstream, downstreamNext: downstreamNext) }
    }

    /// `cutInPlace`'s loop; the separators' offsets are found into a buffer on this call's stack.
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
                // Before every piece, so `send` need not.
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

import Synchronization

/// A source with one reader at a time (a TCP connection's bytes, a UDP socket's datagrams).
protocol SingleReaderSource: AnyObject, Sendable {
    /// The loop the source lives on.
    var loop: EventLoop { get }
    /// Stops reading for the reader `token` was handed to; a later reader's token is left alone. Loop thread only.
    func stopReading(_ token: ReaderToken<Self>)
}

/// The disposable of one reader's subscription: disposing it (from any thread) stops reading for that reader.
///
/// The source compares tokens by identity, so disposing the token of a reader that
/// has already been replaced does not stop the reader after it.
final class ReaderToken<Source: SingleReaderSource>: LoopDisposable, @unchecked Sendable {
    // `source` is immutable (its state is touched on its loop only); `disposedFlag` is atomic.
    private let source: Source
    let disposedFlag = Atomic<Bool>(false)

    init(_ source: Source) { self.source = source }

    var loop: EventLoop { source.loop }

    func abandon() {
        source.stopReading(self)
    }
}

/// A single-reader source's reader and the token handed to it, changed together.
///
/// Thread rule: loop thread only (a field of its source).
struct ReaderSlot<Value, Source: SingleReaderSource> {
    /// The current reader; nil when nobody reads.
    private(set) var reader: Subscriber<Value>?
    private var token: ReaderToken<Source>?

    init() {}

    /// Makes `reader` the reader of `source` and returns the token for its subscription's disposable.
    mutating func fill(_ reader: Subscriber<Value>, of source: Source) -> ReaderToken<Source> {
        let token = ReaderToken(source)
        self.reader = reader
        self.token = token
        return token
    }

    /// Whether `token` belongs to the current reader (a replaced reader's token does not).
    func isCurrent(_ token: ReaderToken<Source>) -> Bool { self.token === token }

    /// Empties the slot and returns the reader it held (to be told the end, or not).
    @discardableResult
    mutating func take() -> Subscriber<Value>? {
        let reader = self.reader
        self.reader = nil
        token = nil
        return reader
    }
}

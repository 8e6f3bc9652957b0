import Synchronization

/// A source with one reader at a time (a TCP connection's bytes, a UDP socket's datagrams).
protocol SingleReaderSource: AnyObject, Sendable {
    /// The loop the source lives on.
    var loop: EventLoop { get }
    /// The source itself: named, not `Self`, because a non-final class (`StreamConnection`) cannot
    /// take a `ReaderToken<Self>` parameter.
    associatedtype TokenSource: SingleReaderSource where TokenSource.TokenSource == TokenSource
    /// Stops reading for the reader `token` was handed to; a later reader's token is left alone. Loop thread only.
    func stopReading(_ token: ReaderToken<TokenSource>)
}

/// The disposable of one gated reader's subscription: disposing it (from any thread) stops reading for that reader.
///
/// Only a reader behind a gate (`Subscriber`) gets one. A reader that is its subscription's own sink on
/// the source's loop (`HomeGate.sink`) has no gate at its subscription's root, so the source itself
/// takes that place (`StreamConnection` as `ObserverReleasing`): the teardown that disposes the reader
/// tells the source, and the reader needs no token.
///
/// Disposing the token of a reader that has already been replaced does not stop the reader
/// after it (`ReaderSlot.currentReaderIsDisposed`).
///
/// One word (an idle server holds a token per reading client): the source, retained, until the
/// first `dispose()` takes it, so that word is also the disposed flag; `LoopDisposable`'s flag and
/// stored source in one field.
final class ReaderToken<Source: SingleReaderSource>: Disposable, @unchecked Sendable where Source.TokenSource == Source {
    // `sourceWord` is the only state, atomic: the retained source, or nil once disposed.
    private let sourceWord: Atomic<UnsafeMutableRawPointer?>

    init(_ source: Source) { sourceWord = Atomic(Unmanaged.passRetained(source).toOpaque()) }

    deinit {
        if let word = sourceWord.load(ordering: .acquiring) { Unmanaged<Source>.fromOpaque(word).release() }
    }

    /// Stops reading for this token's reader on the source's loop (now, or queued there). Idempotent.
    ///
    /// Thread rule: safe from any thread.
    func dispose() {
        guard let word = sourceWord.exchange(nil, ordering: .acquiringAndReleasing) else { return }
        let source = Unmanaged<Source>.fromOpaque(word).takeRetainedValue()
        if source.loop.inEventLoop {
            source.stopReading(self)
        } else {
            // Refused only after shutdown, which already ended the source's reader: nothing is lost.
            _ = source.loop.enqueue { [self] in source.stopReading(self) }
        }
    }

    /// Whether `dispose()` has been called.
    ///
    /// Thread rule: safe from any thread.
    var isDisposed: Bool { sourceWord.load(ordering: .acquiring) == nil }
}

/// What a single-reader source keeps of its reader: whether that reader's subscription is disposed.
protocol SlotReader {
    /// Whether the reader's subscription is disposed (a reader with none, never).
    var isDisposed: Bool { get }
}

extension HomeGate: SlotReader {}

/// A single-reader source's reader: one word (the token handed to it is not kept).
///
/// Thread rule: loop thread only (a field of its source).
struct ReaderSlot<Reader: SlotReader> {
    /// The current reader (its gate, or its sink: see `HomeGate`); nil when nobody reads.
    private(set) var reader: Reader?

    init() {}

    /// Makes `reader` the reader; what stops it when its subscription is disposed is the caller's to
    /// give that subscription (a `ReaderToken`, or the source as its root).
    mutating func fill(_ reader: Reader) {
        self.reader = reader
    }

    /// Whether a disposal reaching the source now (a token's, or a sink reader's teardown) is the
    /// current reader's: exactly when the current reader's subscription is disposed.
    ///
    /// A reader's subscription is disposed, its flag set first, before its token or teardown
    /// reaches the source; so the disposed reader is the current one exactly when the current
    /// reader's subscription is disposed. A later reader could only be there after the disposed
    /// one was taken out of the slot, and its own subscription is not disposed (if it is, its own
    /// disposal is on its way to stop it: stopping now stops the same reader). So a replaced
    /// reader's disposal leaves the next reader alone, and the slot keeps no token.
    var currentReaderIsDisposed: Bool { reader?.isDisposed == true }

    /// Empties the slot and returns the reader it held (to be told the end, or not).
    @discardableResult
    mutating func take() -> Reader? {
        let reader = self.reader
        self.reader = nil
        return reader
    }
}

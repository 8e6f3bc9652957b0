import Synchronization

/// A disposable whose state lives on one loop's thread, disposed from any thread.
///
/// The first `dispose()` runs `abandon()` on the loop thread (now, or queued there). A refused
/// hop loses nothing: a loop refuses work only once closed, and its shutdown already ended
/// every handle, request and timer with `EventLoopError.shutDown`. `abandon()` stops, closes,
/// cancels, and drops the subscriber without telling it.
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; `abandon()` is loop thread only.
protocol LoopDisposable: Disposable {
    /// The loop whose thread runs `abandon()`.
    var loop: EventLoop { get }
    /// Set by the first `dispose()`; never cleared.
    var disposedFlag: Atomic<Bool> { get }
    /// Stops what the object does and releases what it holds. Called once, on the loop thread.
    func abandon()
}

extension LoopDisposable {
    /// Sets the flag, then runs `abandon()` on the loop thread (now, or queued there). Idempotent.
    ///
    /// Inlined into each conformer so the flag and loop are not read through the witness table.
    /// Thread rule: safe from any thread.
    @inline(__always)
    func dispose() {
        guard !disposedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if loop.inEventLoop {
            abandon()
        } else {
            // Refused only after shutdown, which already ended this object: nothing is lost.
            _ = loop.enqueue { [self] in abandon() }
        }
    }

    /// Whether `dispose()` has been called.
    /// Thread rule: safe from any thread.
    var isDisposed: Bool { disposedFlag.load(ordering: .acquiring) }
}

/// A libuv handle that feeds one subscriber: the common part of handle-backed signal sources.
///
/// `dispose()` closes the handle; `fail(_:)` closes it and ends the subscriber with an error;
/// shutdown fails it with `EventLoopError.shutDown`; the close callback drops the subscriber.
/// Subclasses open the handle (`didOpen()`), start it, send to `subscriber`, and override
/// `willClose()` when closing needs more than `uv_close`.
/// Thread rule: loop thread only, except `init`, `dispose()` and `isDisposed`.
class SubscriberHandle<Value>: LoopHandle, LoopDisposable, @unchecked Sendable {
    // Sendable: `subscriber` is loop thread only (`dispose()` hops there); `disposedFlag` is atomic.
    /// Who receives the handle's values; nil once the handle closed.
    final var subscriber: Subscriber<Value>?
    final let disposedFlag = Atomic<Bool>(false)

    /// Allocates the handle's memory; the subclass opens it on the loop thread.
    init(loop: EventLoop, byteCount: Int, subscriber: Subscriber<Value>) {
        self.subscriber = subscriber
        super.init(loop: loop, byteCount: byteCount)
    }

    /// The subscription was disposed: close without telling the subscriber.
    func abandon() { close() }

    /// Closes the handle (`uv_close`; a simulated handle, which has none, overrides it).
    func close() { closeHandle() }

    /// Closes the handle, then ends the subscriber with `error`.
    final func fail(_ error: any Error) {
        let subscriber = self.subscriber
        close()
        subscriber?.sendError(error)
    }

    override func closeForShutdown() {
        fail(EventLoopError.shutDown(loop: loop.name))
    }

    override func didClose() { subscriber = nil }
}

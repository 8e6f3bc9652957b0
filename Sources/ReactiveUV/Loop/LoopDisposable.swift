import Synchronization

/// A disposable whose state lives on one loop's thread, disposed from any thread.
///
/// Every I/O source needs the same `dispose()`, so it is written here once:
/// an atomic flag lets only the first call through; on the loop thread it
/// calls `abandon()` at once, on any other thread it queues `abandon()` on the
/// loop. A hop the loop refuses loses nothing: a loop refuses work only once it
/// has closed, and its shutdown has already ended every handle, request and
/// timer by then (each telling its subscriber `EventLoopError.shutDown`).
///
/// A conformer stores `let disposedFlag = Atomic<Bool>(false)` and implements
/// `abandon()`: stop, close, cancel, and drop the subscriber without telling it
/// anything (the subscription is going away).
///
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
    /// Inlined into each conformer's witness: called through it, the default read `disposedFlag` and
    /// `loop` through the witness table (a subscription's teardown disposes each of its sources, most
    /// of them ended already).
    ///
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
    ///
    /// Thread rule: safe from any thread.
    var isDisposed: Bool { disposedFlag.load(ordering: .acquiring) }
}

/// A libuv handle that feeds one subscriber: the common part of handle-backed signal sources.
///
/// - `dispose()` (any thread) closes the handle on its loop (`LoopDisposable`);
/// - `fail(_:)` closes it and ends the subscriber with an error;
/// - the loop's shutdown fails it with `EventLoopError.shutDown`;
/// - the close callback drops the subscriber (and whatever its closures hold).
///
/// Subclasses open the handle (`uv_<type>_init`, `didOpen()`), start it, and
/// send values to `subscriber`; they override `willClose()` to stop it when
/// closing needs more than `uv_close`.
///
/// Thread rule: loop thread only, except `init`, `dispose()` and `isDisposed`.
class SubscriberHandle<Value>: LoopHandle, LoopDisposable, @unchecked Sendable {
    // `subscriber` is loop thread only (`dispose()` hops there); `disposedFlag` is atomic.
    /// Who receives the handle's values; nil once the handle closed.
    final var subscriber: Subscriber<Value>?
    final let disposedFlag = Atomic<Bool>(false)

    /// Allocates the handle's memory; the subclass opens it on the loop thread.
    init(loop: EventLoop, byteCount: Int, subscriber: Subscriber<Value>) {
        self.subscriber = subscriber
        super.init(loop: loop, byteCount: byteCount)
    }

    /// The subscription was disposed: close without telling the subscriber.
    func abandon() { closeHandle() }

    /// Closes the handle, then ends the subscriber with `error`.
    final func fail(_ error: any Error) {
        let subscriber = self.subscriber
        closeHandle()
        subscriber?.sendError(error)
    }

    override func closeForShutdown() {
        fail(EventLoopError.shutDown(loop: loop.name))
    }

    override func didClose() { subscriber = nil }
}

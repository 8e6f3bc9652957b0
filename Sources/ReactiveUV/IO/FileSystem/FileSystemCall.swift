internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A one-request file-system signal (`Files.stat`, `Files.rename`...) subscribed with callbacks
/// (`subscribe(next:error:completed:)`) on its loop's thread: the subscription, the request and the
/// callbacks in one object.
///
/// This is how that subscription is specialized, not a second kind of it: the general path makes
/// a `Subscription`, a `Sink` and a `FileSystemOperation` for the one request, three objects whose
/// jobs here shrink to one each (hold the callbacks, run the dispose handshake, own the `uv_fs_t`).
/// Made only where the general path would have nothing more to do (`FileSystemSignal.subscribeCallbacks`):
/// the calling thread is the loop's and its current scheduler, the signal's loop (if it names one)
/// is that loop, the loop takes new work, and no event logging is on. It then keeps every promise
/// the general path makes:
/// - the callbacks run on the loop thread; the value, then completion; or one error, a `UVError`
///   whose context names the call and the path (a start libuv refused fails at once);
/// - the dispose handshake is `DeliveryHandshake`'s: once `dispose()` returned no callback begins
///   (it never waits), and once `disposeAndWait()` returned none is running either;
/// - on a terminal event the call is disposed first, then `error` or `completed` runs, and the
///   callbacks are released (a callback that holds the returned disposable makes no cycle);
/// - `dispose()` before the end cancels the pending request (`uv_cancel`: one still queued for
///   the pool is cancelled, one already running finishes); its result is then dropped, and undone
///   if it made something (`singleDiscard`);
/// - the loop's shutdown fails a pending call with `EventLoopError.shutDown`.
///
/// Its `uv_fs_t` memory comes from the loop's spares (`LoopRequest`). A stat subscribed this way
/// costs 3 allocations (the signal, this call, and libuv's copy of the path) where the general
/// path costs 5.
///
/// Thread rule: `dispose()` and `isDisposed` safe from any thread; the rest loop thread only.
final class FileSystemCall<Value>: FileSystemRequest, Disposable, DeliveryHandshake, @unchecked Sendable {
    // `signal` is immutable; `disposedFlag` and `delivering` are atomic; the callbacks are touched
    // on the loop thread only (`dispose()` from elsewhere hops there to release them).
    let disposedFlag = Atomic<Bool>(false)
    let delivering = Atomic<UInt>(0)
    /// The signal: its call (`singleStart`, `singleRead`, `singleDiscard`) and its context, for errors.
    private let signal: FileSystemSignal<Value>
    // Unchecked exclusivity: touched on the loop thread only, and moved out before each call.
    @exclusivity(unchecked) private var next: ((Value) -> Void)?
    @exclusivity(unchecked) private var error: ((any Error) -> Void)?
    @exclusivity(unchecked) private var completed: (() -> Void)?

    /// Takes the callbacks owned, as any initializer does.
    init(loop: EventLoop, signal: FileSystemSignal<Value>, next: ((Value) -> Void)?,
         error: ((any Error) -> Void)?, completed: (() -> Void)?) {
        self.signal = signal
        self.next = next
        self.error = error
        self.completed = completed
        super.init(loop: loop)
    }

    override var label: String { signal.singleContext.description }

    /// Whether the call was disposed or has ended.
    ///
    /// Thread rule: safe from any thread.
    var isDisposed: Bool { disposedFlag.load(ordering: .acquiring) }

    /// Starts the request; a start libuv refuses (or a loop that takes no more requests) fails the call at once.
    ///
    /// Thread rule: loop thread only.
    func start() {
        assertInEventLoop()
        // Bound by pattern, not `unsafelyUnwrapped`: read through Optional's generic accessor, the
        // closure was rewrapped in a reabstraction thunk, an allocation per call.
        guard let start = signal.singleStart else {
            assertionFailure("a FileSystemCall was made for a signal of steps (\(label))")
            return
        }
        guard loop.acceptsNewRequests else {
            end(failure: EventLoopError.shutDown(loop: loop.name))
            return
        }
        willStart()
        let result = start(loop.uvLoop, pointer(as: uv_fs_t.self), signal.singleContext, fileSystemRequestCallback)
        if result < 0 {
            startFailed()
            end(failure: UVError(code: result, context: label))
        }
    }

    /// Stops the call: no callback begins after this returns; the request is cancelled and the
    /// callbacks released on the loop thread.
    ///
    /// Thread rule: safe from any thread. Never waits: a callback running on the loop thread may
    /// still be finishing (`disposeAndWait()` waits for it).
    func dispose() {
        if disposedFlag.exchange(true, ordering: .sequentiallyConsistent) { return }
        if loop.inEventLoop {
            tearDown()
            return
        }
        // Refused only once the loop's shutdown began, which fails every pending call first (so
        // this one has ended and released its callbacks): nothing is lost.
        _ = loop.enqueue { [self] in tearDown() }
    }

    /// `dispose()`, then suspends until a callback running on the loop thread has returned (at
    /// once when none runs, or when awaited from inside it). Also after the call ended by itself:
    /// its end sets the flag before `completed`/`error` runs.
    ///
    /// Thread rule: safe from any task; blocks no thread.
    func disposeAndWait() async {
        dispose()
        await waitForDeliveryToEnd(hoppingTo: loop)
    }

    /// What `dispose()` leaves for the loop thread: cancel the request, release the callbacks.
    private func tearDown() {
        if isPending { cancel() }
        next = nil
        error = nil
        completed = nil
    }

    /// The loop is shutting down with this request pending: cancels it, and fails the call. Cancelled
    /// first, not only by the end's teardown: a call disposed from another thread, whose teardown is
    /// still queued, ends nothing here.
    override func cancelForShutdown() {
        cancel()
        end(failure: EventLoopError.shutDown(loop: loop.name))
    }

    /// The terminal event, as `Sink.handleEnd`: disposed first, then `error` (with `failure`) or `completed`.
    private func end(failure: (any Error)?) {
        let entry = enterDelivery()
        if entry == .refused { return }
        defer { leaveDelivery(entry) }
        // Both are moved out (no retain); the one that does not run is released now, the other once it ran.
        var onError = error.take()
        var onCompleted = completed.take()
        if failure == nil { onError = nil } else { onCompleted = nil }
        dispose()
        if let failure { onError?(failure) } else { onCompleted?() }
    }

    // Called through the vtable, so generic: specialized for the hot case (stat throughput), where the
    // generic body would handle a 145-byte `FileInfo` through its value witnesses.
    @_specialize(exported: false, where Value == FileInfo)
    override func requestFinished() {
        didFinish()
        let fs = pointer(as: uv_fs_t.self)
        let result = Int(fs.pointee.result)
        if disposedFlag.load(ordering: .acquiring) {
            if result >= 0, let discard = signal.singleDiscard { discard(fs) }
            uv_fs_req_cleanup(fs)
            return
        }
        guard result >= 0, let read = signal.singleRead else {
            uv_fs_req_cleanup(fs)
            end(failure: UVError(code: Int32(truncatingIfNeeded: result), context: label))
            return
        }
        // Read, then free what libuv allocated for the result.
        let value = read(result, fs)
        uv_fs_req_cleanup(fs)
        let entry = enterDelivery()
        if entry == .refused { return }
        defer { leaveDelivery(entry) }
        // Moved out: called without a retain, and released once it ran (the call sends one value).
        if let next = next.take() { next(value) }
        // The completion joins this delivery (one handshake for both events). The value's callback
        // may have disposed the call: `end` then finds it refused.
        end(failure: nil)
    }
}

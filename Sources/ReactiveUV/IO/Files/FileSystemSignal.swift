internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A cold file-system signal: each subscriber gets a `FileSystemOperation` on the loop thread.
///
/// A source of its own (not `Signal { ... }`) so that subscribing on the loop thread, the common case,
/// makes no closures: the operation is made and started right in `attach`; only from another thread does
/// the subscription hop to the loop (`LoopBinding`). A call its checks refuse is not one of these
/// (`Files.refused`: a signal that fails each subscriber).
typealias FileSystemSignal<Value> = SourceSignal<FileSystemSource<Value>>

/// What a file-system signal runs for each subscriber: one request, or a body of steps.
///
/// Thread rule: safe from any thread (immutable); `attach` on the subscription's home thread.
struct FileSystemSource<Value>: SignalSource, @unchecked Sendable {
    // Every stored property is immutable; the closures run on the loop thread only.
    /// Starts a one-request signal's `uv_fs_*` call with the loop, the request, the context and the callback.
    typealias Start = (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<uv_fs_t>, FileCallContext, @escaping uv_fs_cb) -> Int32
    /// Reads a successful result from the `uv_fs_t` (loop thread, before cleanup).
    typealias Read = (Int, UnsafeMutablePointer<uv_fs_t>) -> Value
    /// Undoes a successful result that arrived after the operation ended.
    typealias Discard = (UnsafeMutablePointer<uv_fs_t>) -> Void

    let explicitLoop: EventLoop?
    /// The call (its name, for messages), and a one-request signal's path(s): read by its operations,
    /// which hold the signal, with `singleStart`, `singleRead` and `singleDiscard`.
    let singleContext: FileCallContext
    let singleStart: Start?
    let singleRead: Read?
    let singleDiscard: Discard?
    /// Starts a longer operation's steps (nil for a one-request signal).
    let body: ((FileSystemOperation<Value>) -> Void)?

    /// A source of one request.
    init(on loop: EventLoop?, context: FileCallContext, start: @escaping Start, read: @escaping Read, discard: Discard?) {
        explicitLoop = loop
        singleContext = context
        singleStart = start
        singleRead = read
        singleDiscard = discard
        body = nil
    }

    /// A source of steps that `body` starts.
    init(call: StaticString, on loop: EventLoop?, body: @escaping (FileSystemOperation<Value>) -> Void) {
        explicitLoop = loop
        singleContext = FileCallContext(call, "")
        singleStart = nil
        singleRead = nil
        singleDiscard = nil
        self.body = body
    }

    // Generic, called through the signal's vtable: specialized for the hot case (stat throughput),
    // where each subscriber would look up the metadata of `Subscriber<Value>` and the operation.
    @_specialize(exported: false, where Value == FileInfo)
    static func attach(_ observer: Observer<Value>, to subscription: Subscription, signal: FileSystemSignal<Value>) {
        let subscriber = Subscriber(observer: observer, subscription: subscription)
        subscription.attachRoot(subscriber)
        // As the base signal's attach: a subscription disposed before it attached starts no request.
        if subscription.isDisposed { return }
        subscription.add(subscribed(subscriber, signal: signal))
    }

    private static func subscribed(_ subscriber: Subscriber<Value>, signal: FileSystemSignal<Value>) -> (any Disposable)? {
        let source = signal.source
        // On the loop already: start now (what LoopBinding.open would do, without its closure).
        if let loop = source.explicitLoop ?? (subscriber.homeScheduler as? EventLoop), loop.inEventLoop, loop.acceptsNewHandles {
            return begin(on: loop, for: subscriber, signal: signal)
        }
        return LoopBinding.open(on: source.explicitLoop, for: subscriber, what: "Files.\(source.singleContext.call)") { loop in
            begin(on: loop, for: subscriber, signal: signal)
        }
    }

    private static func begin(on loop: EventLoop, for subscriber: Subscriber<Value>, signal: FileSystemSignal<Value>) -> any Disposable {
        let operation = FileSystemOperation(loop: loop, subscriber: subscriber)
        if let body = signal.source.body { body(operation) } else { operation.single(signal) }
        return operation
    }
}

extension Files {
    /// The checks' refusal, if any (they run when the signal is made): the one way every `Files` call
    /// turns its door checks into an error to send.
    static func refusal(_ checks: () throws(UVError) -> Void) -> UVError? {
        do {
            try checks()
            return nil
        } catch {
            return error
        }
    }

    /// A cold file-system signal: the checks run when it is made (an error there ends each subscriber before any
    /// request), then `body` starts the operation's first step on the loop thread.
    static func operation<Value>(
        _ call: StaticString,
        on loop: EventLoop?,
        checks: () throws(UVError) -> Void,
        _ body: @escaping (FileSystemOperation<Value>) -> Void
    ) -> Signal<Value> {
        if let refusal = refusal(checks) { return refused(call, refusal) }
        return FileSystemSignal(FileSystemSource(call: call, on: loop, body: body)).debugNamed("+Files.\(call)")
    }

    /// A signal of one request that sends what `read` makes of its result, then completes.
    ///
    /// `start` is given the loop, the request, `context` (whose paths a closure with no captures can use) and the callback.
    /// `context` is consumed: the signal stores the caller's strings (borrowed, each path was retained and released once more).
    static func single<Value>(
        _ call: StaticString,
        context: consuming FileCallContext,
        on loop: EventLoop?,
        checks: () throws(UVError) -> Void,
        _ start: @escaping FileSystemSource<Value>.Start,
        read: @escaping FileSystemSource<Value>.Read,
        discard: FileSystemSource<Value>.Discard? = nil
    ) -> Signal<Value> {
        if let refusal = refusal(checks) { return refused(call, refusal) }
        return FileSystemSignal(FileSystemSource(on: loop, context: context, start: start, read: read, discard: discard)).debugNamed("+Files.\(call)")
    }

    /// A signal of one request that completes (with no value) when it succeeds.
    static func single(
        _ call: StaticString,
        context: consuming FileCallContext,
        on loop: EventLoop?,
        checks: () throws(UVError) -> Void,
        _ start: @escaping FileSystemSource<Void>.Start
    ) -> Signal<Void> {
        single(call, context: context, on: loop, checks: checks, start, read: { _, _ in () })
    }

    /// What a call its checks refused is: a signal that fails each subscriber with `refusal`, before any request.
    private static func refused<Value>(_ call: StaticString, _ refusal: UVError) -> Signal<Value> {
        Signal<Value>.error(refusal).debugNamed("+Files.\(call)")
    }
}

internal import CLibUV
import Synchronization

/// Blocking work on libuv's thread pool (`uv_queue_work`), with the result delivered as a signal.
///
/// The pool is process-wide: 4 threads unless `UV_THREADPOOL_SIZE` says
/// otherwise when it starts (at the first request that needs it; `setSize`
/// sets it before that). File requests (`Files`, `OpenFile`, `FilePoll`), DNS
/// lookups (which libuv lets take at most half of the threads, so slow lookups
/// cannot starve the rest) and `run` all share it: work that blocks for long
/// holds a thread the others wait for. `size` says how many threads there are.
///
/// Thread rule: safe from any thread.
public enum ThreadPool {
    /// Runs `work` on a pool thread and sends what it returns (then completes), or fails with what it throws.
    ///
    /// The work is queued when a subscriber arrives. Disposing before it has
    /// started cancels it (`uv_cancel`: it never runs); once it runs, it runs
    /// to the end and its result is dropped. When the loop shuts down, queued
    /// work is cancelled and the subscriber gets `EventLoopError.shutDown`;
    /// work already running makes the shutdown wait for it.
    ///
    /// The work must not wait for another request on the pool (a `Files` or
    /// `OpenFile` signal's `first()` or `waitUntilCompleted()`, a DNS lookup):
    /// when every pool thread runs such work, none is left for the requests
    /// they wait for, and each waits until its timeout, or for ever without one
    /// (four `run`s each waiting on a `Files.read` did). Return a signal and
    /// compose it instead (`flatMap`).
    ///
    /// - Parameters:
    ///   - loop: The loop that queues the work and receives the result; nil for the subscription's home loop.
    ///   - work: The blocking work; it runs on a pool thread, never on a loop thread.
    /// - Returns: A signal of one value.
    ///
    /// Thread rule: safe from any thread.
    public static func run<Value: Sendable>(on loop: EventLoop? = nil, _ work: @escaping @Sendable () throws -> Value) -> Signal<Value> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "ThreadPool.run") { loop in
                guard loop.acceptsNewRequests else {
                    subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
                    return nil
                }
                let request = PoolWork(loop: loop, work: work, subscriber: subscriber)
                return LoopBinding.started(request, for: subscriber) { try request.queue() }
            }
        }.debugNamed("+ThreadPool.run")
    }
}

/// A request that runs on libuv's thread pool: the thread-pool family's backend seam.
///
/// `queueOnPool` runs `runOnPool()` on a pool thread, then `complete(status:)` on the loop thread;
/// every pool job (`ThreadPool.run`, the file family's jobs) is one of these, and the C callbacks
/// see only this non-generic base. A second backend runs the same two steps its own way. How
/// many threads libuv starts, and how, is `PoolUse` and `PoolStartRequest`'s.
///
/// Thread rule: loop thread only, except `runOnPool()` (a pool thread).
class PoolWorkBase: LoopRequest {
    /// Runs the work; called on a pool thread.
    func runOnPool() {}
    /// Delivers the outcome; called on the loop thread with libuv's status (`ECANCELED` when cancelled).
    func complete(status: Int32) {}

    /// Queues the work (`uv_queue_work`); loop thread only.
    ///
    /// - Throws: `UVError` with `context` when libuv refused.
    final func queueOnPool(_ context: @autoclosure () -> String) throws(UVError) {
        let request = pointer(as: uv_work_t.self)
        try start(context()) { uv_queue_work(loop.uvLoop, request, poolWorkCallback, poolAfterWorkCallback) }
    }
}

extension PoolWorkBase {
    /// Ends `subscriber` with a pool job's result: libuv's error (`status` < 0, `ECANCELED` when
    /// cancelled), else the value and completion, the job's error, or `ECANCELED` if it never ran.
    final func deliver<Value>(_ outcome: Result<Value, any Error>?, status: Int32, to subscriber: Subscriber<Value>,
                              context: String, notRun: String) {
        if status < 0 {
            subscriber.sendError(UVError(code: status, context: context))
            return
        }
        switch outcome {
        case .success(let value)?:
            subscriber.sendNext(value)
            subscriber.sendCompleted()
        case .failure(let error)?:
            subscriber.sendError(error)
        case nil:
            subscriber.sendError(UVError(code: UVError.cancelledCode, message: notRun, context: context))
        }
    }
}

/// One `uv_work_t` running a closure and delivering its result.
final class PoolWork<Value: Sendable>: PoolWorkBase, LoopDisposable, @unchecked Sendable {
    // `work` is immutable. `outcome` is written on the pool thread and read on the loop thread after
    // libuv hands the request back (its queue mutex orders the two). `subscriber` is loop thread only
    // (`dispose()` hops there); `disposedFlag` is atomic.
    private let work: @Sendable () throws -> Value
    private var outcome: Result<Value, any Error>?
    private var subscriber: Subscriber<Value>?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, work: @escaping @Sendable () throws -> Value, subscriber: Subscriber<Value>) {
        self.work = work
        self.subscriber = subscriber
        super.init(loop: loop, type: UV_WORK)
    }

    override var label: String { "thread-pool work from ThreadPool.run" }

    func queue() throws(UVError) {
        try queueOnPool("uv_queue_work")
    }

    override func runOnPool() {
        outcome = Result { try work() }
    }

    override func complete(status: Int32) {
        let subscriber = self.subscriber
        self.subscriber = nil
        let outcome = self.outcome
        self.outcome = nil
        guard let subscriber else { return }
        deliver(outcome, status: status, to: subscriber, context: "ThreadPool.run", notRun: "the work did not run")
    }

    override func cancelForShutdown() {
        let subscriber = self.subscriber
        self.subscriber = nil
        cancel()
        subscriber?.sendError(EventLoopError.shutDown(loop: loop.name))
    }

    func abandon() {
        subscriber = nil
        cancel()
    }
}

private let poolWorkCallback: uv_work_cb = { request in
    guard let data = request?.pointee.data else { return }
    // The retain taken by willStart() keeps the request alive until the after-work callback.
    Unmanaged<PoolWorkBase>.fromOpaque(data).takeUnretainedValue().runOnPool()
}

private let poolAfterWorkCallback: uv_after_work_cb = { request, status in
    guard let data = request?.pointee.data else { return }
    let work = Unmanaged<PoolWorkBase>.fromOpaque(data).takeRetainedValue()
    work.didFinish()
    work.complete(status: status)
}

internal import CLibUV
import Synchronization

/// Blocking work on libuv's thread pool (`uv_queue_work`), with the result delivered as a signal.
///
/// The pool is process-wide (`size` threads, 4 unless set) and shared by file requests, DNS
/// lookups (at most half of the threads) and `run`: work that blocks for long holds a thread the
/// others wait for.
///
/// Thread rule: safe from any thread.
public enum ThreadPool {
    /// Runs `work` on a pool thread and sends what it returns (then completes), or fails with what it throws.
    ///
    /// Queued when a subscriber arrives. Disposing before it started cancels it; once running, it
    /// runs to the end and its result is dropped. At shutdown queued work is cancelled (the
    /// subscriber gets `EventLoopError.shutDown`) and running work makes the shutdown wait.
    ///
    /// The work must not wait for another pool request (a `Files` signal's `first()`, a DNS lookup):
    /// with every pool thread waiting, none is left to answer. Return a signal and `flatMap` it instead.
    ///
    /// On a simulated loop (`Simulation`) the work runs as a callback of the simulation on its driving
    /// thread (traced as pool work, with no loop current), one job at a time and never concurrently with
    /// the loops; the result arrives on the loop after a virtual duration (1 ms unless
    /// `Simulation.setThreadPool(_:)` says otherwise). Disposal, errors and shutdown behave as above.
    ///
    /// - Parameters:
    ///   - loop: The loop that queues the work and receives the result; nil for the subscription's home loop.
    ///   - work: The blocking work, run on a pool thread.
    ///
    /// Thread rule: safe from any thread.
    public static func run<Value: Sendable>(on loop: EventLoop? = nil, _ work: @escaping @Sendable () throws -> Value) -> Signal<Value> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "ThreadPool.run") { loop in
                guard loop.acceptsNewRequests else {
                    subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
                    return nil
                }
                if loop.isSimulated { return SimulatedPoolWork.start(on: loop, work, for: subscriber) }
                let request = PoolWork(loop: loop, work: work, subscriber: subscriber)
                return LoopBinding.started(request, for: subscriber) { try request.queue() }
            }
        }.debugNamed("+ThreadPool.run")
    }
}

/// A request that runs on libuv's thread pool: the thread-pool family's backend seam.
/// `runOnPool()` runs on a pool thread, then `complete(status:)` on the loop thread; every pool
/// job is one, so the C callbacks see only this base. A second backend runs the two steps its own way.
/// Thread rule: loop thread only, except `runOnPool()` (a pool thread).
class PoolWorkBase: LoopRequest {
    /// Runs the work; called on a pool thread.
    func runOnPool() {}
    /// Delivers the outcome; called on the loop thread with libuv's status (`ECANCELED` when cancelled).
    func complete(status: Int32) {}

    /// Queues the work (`uv_queue_work`); loop thread only.
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
    // Sendable: `work` is immutable; `outcome` is written on the pool thread and read on the loop
    // thread after libuv hands the request back (its queue mutex orders them); `subscriber` is loop
    // thread only; `disposedFlag` is atomic.
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

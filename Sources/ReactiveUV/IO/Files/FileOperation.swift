internal import CLibUV
import Synchronization

/// The part of a `FileOperation` libuv's callbacks reach (a C callback cannot name a generic type): a
/// request calls `requestFinished()`, a pool job `PoolWorkBase`'s `runOnPool()` and `complete(status:)`.
///
/// Thread rule: loop thread only, except `init` and `runOnPool()` (a pool thread).
class FileSystemRequest: PoolWorkBase {
    /// Memory for a `uv_fs_t`, large enough for a `uv_work_t` too: the steps use it in turn.
    init(loop: EventLoop) {
        super.init(fileSystemOn: loop)
    }

    /// The pending job's stop flag, set when the operation ends (loop thread only).
    final var stop: JobStopFlag?

    /// The pending `uv_fs_t` called back.
    func requestFinished() {}

    /// Cancels a step that has not started; `stopping` also stops a running job between its calls.
    final func cancel(stopping: Bool) {
        if stopping { stop?.set() }
        cancel()
    }
}

/// Calls the operation back; takes over the retain `willStart()` stored in `req.data`.
let fileSystemRequestCallback: uv_fs_cb = { request in
    guard let data = request?.pointee.data else { return }
    Unmanaged<FileSystemRequest>.fromOpaque(data).takeRetainedValue().requestFinished()
}

/// Set when a pool job should stop: a job that makes several system calls stops between them.
final class JobStopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    /// Whether the job should stop. Thread rule: safe from any thread.
    var isSet: Bool { flag.load(ordering: .relaxed) }
    /// Asks the job to stop. Thread rule: safe from any thread.
    func set() { flag.store(true, ordering: .relaxed) }
}

/// One file operation's work for one subscriber: its steps, `uv_fs_*` requests and pool jobs, run one
/// after another on the loop thread, each in the one request memory the operation holds.
///
/// Every file signal runs through this type: a one-request call (`stat`, `rename`), a longer operation
/// (a listing, `mkdir -p`, a tree removal, a whole file read or written), and each operation of an
/// `OpenFile`.
/// - A request's result is read from its `uv_fs_t` on the loop thread before libuv's cleanup; a job
///   runs on a pool thread and its result comes back to the loop thread. Only then does the next step start.
/// - It sends to its subscriber's gate, to the subscription's own sink (`HomeGate`: a one-request signal
///   subscribed with callbacks on its loop, where the operation is the subscription's root), or to a
///   handler (a job an open file runs for a reader of its own).
/// - It ends once: completed, failed (a `UVError` naming the call and the path), shut down
///   (`EventLoopError.shutDown`), or disposed (the subscriber is told nothing).
/// - Ending cancels the pending step (`uv_cancel`; a running job stops between its calls). Its callback
///   then undoes what it made (`discard`: what it opened is closed), and only then run the releases
///   (`onEnd`), so nothing is closed under a step still using it.
///
/// Thread rule: loop thread only, except `init`, `dispose()`, `isDisposed` and a job's work (pool thread).
final class FileOperation<Value>: FileSystemRequest, LoopDisposable, ObserverReleasing, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except `disposedFlag` (atomic) and `poolWork`, set
    // before a job is queued and run on the pool (libuv's queue mutex orders the two).

    /// Where the operation's events go.
    enum Output {
        case gate(HomeGate<Value>)
        /// No subscriber: told the value, or the failure.
        case handler((Result<Value, any Error>) -> Void)
        case ended
    }

    /// What the pending step's callback does.
    private enum Pending {
        case none
        /// A one-request signal's request: the value its `read` makes, then completion.
        case single(FileSystemSignal<Value>)
        /// `read` sees the `uv_fs_t` before cleanup, `completion` the result after it.
        case request(read: (UnsafeMutablePointer<uv_fs_t>) -> Void, completion: (Int) -> Void)
        /// `completion` gets libuv's status of the job.
        case job(completion: (Int32) -> Void)
    }

    let disposedFlag = Atomic<Bool>(false)
    @exclusivity(unchecked) private var output: Output
    @exclusivity(unchecked) private var pending = Pending.none
    /// The pending (or last) step's call, for labels.
    @exclusivity(unchecked) var stepContext: String?
    /// What to undo at the end, newest last.
    @exclusivity(unchecked) private var releases: [() -> Void] = []
    @exclusivity(unchecked) private var poolWork: (() -> Void)?

    init(loop: EventLoop, output: Output) {
        self.output = output
        super.init(loop: loop)
    }

    /// An operation that sends to `subscriber`.
    convenience init(loop: EventLoop, subscriber: Subscriber<Value>) {
        self.init(loop: loop, output: .gate(.subscriber(subscriber)))
    }

    override var label: String {
        if case .single(let signal) = pending { return signal.source.context.description }
        return stepContext ?? ""
    }

    /// Whether the operation has not ended.
    var isRunning: Bool {
        if case .ended = output { return false }
        return true
    }

    /// The subscriber's gate while the operation runs (flow control registers there).
    var subscriber: Subscriber<Value>? {
        if case .gate(.subscriber(let subscriber)) = output { return subscriber }
        return nil
    }

    /// Whether nobody will take a value any more: the operation ended or its subscription was disposed
    /// (on any thread: the subscription's flag is set at once, its teardown comes later).
    var isUnwanted: Bool {
        switch output {
        case .gate(let gate): gate.isDisposed
        case .handler: false
        case .ended: true
        }
    }

    /// Sends a value, if the operation runs.
    func send(_ value: Value) {
        switch output {
        case .gate(let gate): gate.sendNext(value)
        case .handler(let handler): handler(.success(value))
        case .ended: break
        }
    }

    /// Sends values in order as one delivery (`Subscriber.sendNexts`), if the operation runs.
    func send<Values: Sequence>(contentsOf values: Values) where Values.Element == Value {
        guard case .gate(let gate) = output else { return }
        gate.sendNexts(values)
    }

    /// Registers `release` to run once at the end, however the operation ends, once no step is pending
    /// (at once if that is already so).
    func onEnd(_ release: @escaping () -> Void) {
        if isRunning || isPending { releases.append(release) } else { release() }
    }

    /// Ends the operation: completes it, or fails it with `error`.
    func finish(_ error: (any Error)? = nil) {
        var taken = Output.ended
        swap(&taken, &output)
        switch consume taken {
        case .ended:
            return
        case .gate(let gate):
            endAfterOutput()
            gate.sendEnd(failure: error)
        case .handler(let handler):
            endAfterOutput()
            if let error { handler(.failure(error)) }
        }
    }

    /// Stops without telling anyone (the subscription is going away).
    func abandon() {
        output = .ended
        endAfterOutput()
    }

    /// The subscription whose root this operation is was torn down (`HomeGate.sink`).
    @usableFromInline
    func releaseObserver(of _: Subscription) {
        dispose()
    }

    /// Ends the operation with `EventLoopError.shutDown` when its loop shuts down, also while no step is
    /// pending (a paused reader); false if the shutdown began already (the operation has then ended).
    @discardableResult
    func followShutdown() -> Bool {
        guard let token = loop.shutdownObservers.add({ [self] in finish(EventLoopError.shutDown(loop: loop.name)) }) else {
            finish(EventLoopError.shutDown(loop: loop.name))
            return false
        }
        onEnd { token.dispose() }
        return true
    }

    /// The subscriber is another's from here (a FIFO's stream, an open file's reader): the operation sends
    /// nothing more and holds its releases until it is disposed.
    func detach() {
        if isRunning { output = .handler { _ in } }
    }

    override func cancelForShutdown() {
        finish(EventLoopError.shutDown(loop: loop.name))
    }

    /// What every end does once `output` is `.ended`.
    private func endAfterOutput() {
        // A teardown disposes the operation after its own end: marked here, that is one atomic exchange.
        disposedFlag.store(true, ordering: .releasing)
        if isPending {
            // The step may still use what the releases close: its callback runs them.
            stop?.set()
            cancel()
        } else {
            runReleases()
        }
    }

    private func runReleases() {
        guard !releases.isEmpty else { return }
        let releases = self.releases
        self.releases = []
        for release in releases.reversed() { release() }
    }

    /// Whether a step may start: the operation runs and its loop takes requests (else it fails with `shutDown`).
    private func mayStart() -> Bool {
        guard isRunning else { return false }
        if loop.isSimulated {
            finish(loop.simulationRefusal("Files", what: label))
            return false
        }
        guard loop.acceptsNewRequests else {
            finish(EventLoopError.shutDown(loop: loop.name))
            return false
        }
        return true
    }

    /// Starts the pending request with `start`; a refusal fails the step.
    private func begin(_ start: (UnsafeMutablePointer<uv_fs_t>) -> Int32, failed: ((UVError) -> Void)?) {
        willStart()
        let result = start(pointer(as: uv_fs_t.self))
        guard result < 0 else { return }
        let error = UVError(code: result, context: label)
        startFailed()
        pending = .none
        if let failed { failed(error) } else { finish(error) }
    }

    /// Runs the request of a one-request signal: sends what its `read` makes of the result, then completes.
    func single(_ signal: FileSystemSignal<Value>) {
        // `mayStart` with the simulated loop's answer in place of its refusal.
        guard isRunning else { return }
        if loop.isSimulated { return simulateSingle(signal) }
        guard loop.acceptsNewRequests else { return finish(EventLoopError.shutDown(loop: loop.name)) }
        pending = .single(signal)
        let uvLoop = loop.uvLoop
        begin({ signal.source.start(uvLoop, $0) }, failed: nil)
    }

    /// Runs one request step.
    ///
    /// - Parameters:
    ///   - context: The call and its path(s), for errors (`"mkdir /tmp/x"`).
    ///   - start: Starts the `uv_fs_*` call with the loop, the request and the callback.
    ///   - onResult: Told every result, also after the operation ended.
    ///   - read: Reads a successful result from the `uv_fs_t` (before cleanup) while the operation runs.
    ///   - discard: Undoes a successful result that came after the operation ended.
    ///   - failed: Handles a failure; by default the operation fails with it.
    ///   - then: Continues with what `read` made (after cleanup: it may start the next step).
    func request<Result>(
        _ context: String,
        _ start: (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        onResult: ((Int) -> Void)? = nil,
        read: @escaping (Int, UnsafeMutablePointer<uv_fs_t>) -> Result,
        discard: ((UnsafeMutablePointer<uv_fs_t>) -> Void)? = nil,
        failed: ((UVError) -> Void)? = nil,
        then: @escaping (Result) -> Void
    ) {
        guard mayStart() else { return }
        stepContext = context
        var outcome: Result?
        pending = .request(read: { [self] fs in
            let result = Int(fs.pointee.result)
            onResult?(result)
            guard result >= 0 else { return }
            if isRunning { outcome = read(result, fs) } else { discard?(fs) }
        }, completion: { [self] result in
            guard isRunning else { return runReleases() }
            if let value = outcome.take(), result >= 0 { return then(value) }
            let error = UVError(code: Int32(truncatingIfNeeded: result), context: context)
            if let failed { failed(error) } else { finish(error) }
        })
        let uvLoop = loop.uvLoop
        begin({ start(uvLoop, $0, fileSystemRequestCallback) }, failed: failed)
    }

    /// `request` for a call whose result is only success or failure.
    func request(
        _ context: String,
        _ start: (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        onResult: ((Int) -> Void)? = nil,
        failed: ((UVError) -> Void)? = nil,
        then: @escaping () -> Void
    ) {
        request(context, start, onResult: onResult, read: { _, _ in () }, failed: failed, then: { _ in then() })
    }

    /// Runs one pool job: `work` on a pool thread (a job that makes several calls checks its stop flag
    /// between them), `then` with its result on the loop thread.
    ///
    /// - Parameters:
    ///   - discard: Gets a result that came after the operation ended (what the job opened is closed there).
    ///   - failed: Handles the job's error; by default the operation fails with it.
    func job<Result>(
        _ context: String,
        _ work: @escaping @Sendable (JobStopFlag) throws -> Result,
        discard: ((Result) -> Void)? = nil,
        failed: ((any Error) -> Void)? = nil,
        then: @escaping (Result) -> Void
    ) {
        guard mayStart() else { return }
        stepContext = context
        let stop = JobStopFlag()
        self.stop = stop
        var outcome: Swift.Result<Result, any Error>?
        poolWork = { outcome = stop.isSet ? nil : Swift.Result { try work(stop) } }
        pending = .job(completion: { [self] status in
            let result = outcome.take()
            guard isRunning else {
                if case .success(let value)? = result { discard?(value) }
                return runReleases()
            }
            let error: any Error
            switch result {
            case .success(let value)? where status >= 0: return then(value)
            case .failure(let failure)? where status >= 0: error = failure
            case nil where status >= 0:
                error = UVError(code: UVError.cancelledCode, message: "the operation was stopped before it ran", context: context)
            default: error = UVError(code: status, context: context)
            }
            if let failed { failed(error) } else { finish(error) }
        })
        do {
            try queueOnPool(context)
        } catch {
            pending = .none
            poolWork = nil
            if let failed { failed(error) } else { finish(error) }
        }
    }

    override func runOnPool() {
        poolWork?()
    }

    override func complete(status: Int32) {
        poolWork = nil
        var pending = Pending.none
        swap(&pending, &self.pending)
        if case .job(let completion) = consume pending { completion(status) }
    }

    // Called through the vtable, so generic: specialized for the one-request signals' values.
    @_specialize(exported: false, where Value == FileInfo)
    @_specialize(exported: false, where Value == Void)
    override func requestFinished() {
        didFinish()
        let fs = pointer(as: uv_fs_t.self)
        // Moved out and consumed: the step's payload is not copied.
        var pending = Pending.none
        swap(&pending, &self.pending)
        switch consume pending {
        case .single(let signal):
            finishSingle(signal, fs)
        case .request(let read, let completion):
            read(fs)
            uv_fs_req_cleanup(fs)
            completion(Int(fs.pointee.result))
        case .none, .job:
            uv_fs_req_cleanup(fs)
        }
    }

    /// A one-request signal's request called back: its value and completion, or its error.
    @inline(__always)
    private func finishSingle(_ signal: FileSystemSignal<Value>, _ fs: UnsafeMutablePointer<uv_fs_t>) {
        let result = Int(fs.pointee.result)
        // The gate is moved out of `output`, so the operation counts as ended while its value is
        // delivered; only `dispose()` can end it meanwhile, and that sets `disposedFlag` first.
        var taken = Output.ended
        swap(&taken, &output)
        guard case .gate(let gate) = consume taken else {
            uv_fs_req_cleanup(fs)
            return runReleases()
        }
        guard result >= 0, case .request(_, let sendsStat, _) = signal.source.work else {
            uv_fs_req_cleanup(fs)
            endAfterOutput()
            return gate.sendError(UVError(code: Int32(truncatingIfNeeded: result), context: signal.source.context.description))
        }
        // `Value` is `FileInfo` or `Void`: casts the specializations remove.
        if sendsStat {
            // Read in place, before cleanup.
            let info = FileInfo(statOf: fs)
            uv_fs_req_cleanup(fs)
            gate.sendNext(info as! Value)
        } else {
            uv_fs_req_cleanup(fs)
            gate.sendNext(() as! Value)
        }
        // The value's callback may have disposed the subscription, which disposed the operation.
        if disposedFlag.load(ordering: .acquiring) { return }
        endAfterOutput()
        gate.sendCompleted()
    }
}

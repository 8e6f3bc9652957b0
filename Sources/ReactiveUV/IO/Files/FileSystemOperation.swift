internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a file-system call is doing, for its errors and labels: `"stat /tmp/x"`, `"rename a -> b"`.
///
/// Kept as its parts and written out only when needed (an error, a message), so a call that succeeds
/// never builds the string.
///
/// Thread rule: a value type; safe from any thread.
struct FileCallContext: Sendable, CustomStringConvertible {
    /// The system call's name (`"stat"`, `"rename"`): always a literal, so a `StaticString` (a `String`
    /// cost every one-request signal a retain and release of it).
    let call: StaticString
    /// The path the call acts on.
    let path: String
    /// The second path of a two-path call (the destination of `rename`), if any.
    let other: String?

    init(_ call: StaticString, _ path: String, _ other: String? = nil) {
        self.call = call
        self.path = path
        self.other = other
    }

    var description: String {
        if let other { return "\(call) \(path) -> \(other)" }
        return "\(call) \(path)"
    }
}

/// The non-generic part of `FileSystemOperation` that libuv's callback reaches.
///
/// Thread rule: loop thread only, except `init`.
class FileSystemRequest: LoopRequest {
    init(loop: EventLoop) {
        super.init(fileSystemOn: loop)
    }

    /// The pending request called back (`didFinish()` not yet called).
    func requestFinished() {}
}

/// Calls the operation back; takes over the retain `willStart()` stored in `req.data`.
let fileSystemRequestCallback: uv_fs_cb = { request in
    guard let data = request?.pointee.data else { return }
    Unmanaged<FileSystemRequest>.fromOpaque(data).takeRetainedValue().requestFinished()
}

/// One file-system signal's work for one subscriber: `uv_fs_*` requests made one after another on the loop thread.
///
/// Every file-system signal of `Files` (stat, mkdir, rename, a listing, a tree
/// removal...) runs through this type. The operation is at once the
/// subscription's disposable and the holder of the one `uv_fs_t` its steps use
/// in turn (so a one-request signal costs one object and its request memory):
/// - a step is started on the loop thread and its result is read there, from
///   the `uv_fs_t`, before libuv's cleanup frees what it allocated for it;
///   only then does the next step start, reusing the memory;
/// - a one-request signal (`Files.single`) is a step with no closures of its
///   own: its value is read from the `uv_fs_t` in the callback and sent
///   straight to the subscriber, then completion (subscribed with callbacks on
///   its loop's thread, it is a `FileSystemCall` instead: one object in all);
/// - the operation ends once: completed, failed (a `UVError` whose context
///   names the call and the path), shut down (`EventLoopError.shutDown`), or
///   disposed (the subscriber is told nothing);
/// - ending cancels the pending request (`uv_cancel`: one still queued for the
///   pool is cancelled, one already running finishes). Its callback then drops
///   the result and undoes what it made (`discard`: a directory or file it
///   opened is closed), and only then are the operation's releases run (a
///   directory stream is closed once no readdir can still be using it).
///
/// Thread rule: loop thread only, except `init`, `dispose()` and `isDisposed`.
final class FileSystemOperation<Value>: FileSystemRequest, LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable `loop` and the atomic `disposedFlag`.
    private enum State {
        /// Sending through the subscriber's gate.
        case running(Subscriber<Value>)
        case ended
    }

    /// What the pending request's callback does.
    private enum PendingStep {
        case none
        /// The only request of a one-request signal, whose `read` makes the value sent, then completion.
        case single(FileSystemSignal<Value>)
        /// A step of a longer operation: `read` sees the result before cleanup, `completion` after it.
        case step(read: (UnsafeMutablePointer<uv_fs_t>) -> Void, completion: (Int) -> Void)
    }

    /// Set by the first `dispose()`, and by the operation's own end (a `dispose()` after that has nothing to do).
    let disposedFlag = Atomic<Bool>(false)
    // Unchecked exclusivity: these are touched on the loop thread only, never across a call that
    // could reach them again while one is being modified (dynamic checks would sit on every stat's
    // path).
    @exclusivity(unchecked) private var state: State
    @exclusivity(unchecked) private var pending = PendingStep.none
    /// The pending (or last) step's call, for labels.
    @exclusivity(unchecked) private var stepContext = ""
    /// What to undo at the end, newest last (closing what the steps opened).
    @exclusivity(unchecked) private var releases: [() -> Void] = []

    init(loop: EventLoop, subscriber: Subscriber<Value>) {
        state = .running(subscriber)
        super.init(loop: loop)
    }

    override var label: String {
        if case .single(let signal) = pending { return signal.source.singleContext.description }
        return stepContext
    }

    /// Whether the operation has not ended yet.
    var isRunning: Bool {
        if case .running = state { return true }
        return false
    }

    /// The subscriber while the operation runs.
    var subscriber: Subscriber<Value>? {
        if case .running(let subscriber) = state { return subscriber }
        return nil
    }

    /// Sends a value (if the operation still runs).
    func send(_ value: Value) {
        if case .running(let subscriber) = state { subscriber.sendNext(value) }
    }

    /// Sends values in order as one delivery (`Subscriber.sendNexts`), if the operation still runs.
    func send<Values: Sequence>(contentsOf values: Values) where Values.Element == Value {
        if case .running(let subscriber) = state { subscriber.sendNexts(values) }
    }

    /// Registers `release` to run once at the end, however the operation ends (after any pending request called back).
    func onEnd(_ release: @escaping () -> Void) {
        releases.append(release)
    }

    /// Ends the operation: completes the subscriber, or fails it with `error`.
    func finish(_ error: (any Error)? = nil) {
        guard let subscriber = endTakingSubscriber() else { return }
        if let error { subscriber.sendError(error) } else { subscriber.sendCompleted() }
    }

    /// Ends the operation, if it runs, and hands back its subscriber, moved out of `state` (no retain and release).
    private func endTakingSubscriber() -> Subscriber<Value>? {
        var ended = State.ended
        swap(&ended, &state)
        guard case .running(let subscriber) = consume ended else { return nil }
        endAfterState()
        return subscriber
    }

    /// The subscription was disposed: stop without telling the subscriber.
    func abandon() {
        end()
    }

    private func end() {
        state = .ended
        endAfterState()
    }

    /// What `end()` does once `state` is `.ended`.
    private func endAfterState() {
        // The subscription's teardown disposes its children, this one included: marked here, that
        // `dispose()` is one atomic exchange instead of a second `end()`.
        disposedFlag.store(true, ordering: .releasing)
        if isPending {
            // Its callback runs the releases: the request may still be using what they close.
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

    override func cancelForShutdown() {
        cancel()
        finish(EventLoopError.shutDown(loop: loop.name))
    }

    /// Starts the request (the operation's own `uv_fs_t`) with `start`; false after a refusal, which is handled.
    private func begin(_ start: (UnsafeMutablePointer<uv_fs_t>) -> Int32, refused: (UVError) -> Void) {
        willStart()
        let result = start(pointer(as: uv_fs_t.self))
        if result < 0 {
            let context = label
            startFailed()
            pending = .none
            refused(UVError(code: result, context: context))
        }
    }

    /// Runs the one request of a one-request signal: sends what its `singleRead` makes of the result, then completes.
    ///
    /// The signal holds the call (`singleStart`, `singleRead`, `singleDiscard`, `singleContext` for errors); the
    /// operation keeps only a reference to it, so this step copies no closures.
    func single(_ signal: FileSystemSignal<Value>) {
        guard isRunning, let start = signal.source.singleStart else { return }
        guard loop.acceptsNewRequests else {
            finish(EventLoopError.shutDown(loop: loop.name))
            return
        }
        pending = .single(signal)
        let uvLoop = loop.uvLoop
        begin({ start(uvLoop, $0, signal.source.singleContext, fileSystemRequestCallback) }, refused: { finish($0) })
    }

    /// Runs one step of a longer operation.
    ///
    /// - Parameters:
    ///   - context: The call and its path(s), for errors (`"mkdir /tmp/x"`).
    ///   - start: Starts the `uv_fs_*` call with the request and callback given.
    ///   - onResult: Told every result, also after the operation ended (bookkeeping of a descriptor being closed).
    ///   - read: Reads a successful result from the `uv_fs_t` (loop thread, before cleanup) while the operation runs.
    ///   - discard: Undoes a successful result that arrived after the operation ended (closes what it opened).
    ///   - failed: Handles a failure; by default the operation fails with it.
    ///   - then: Continues with what `read` made (after cleanup: it may start the next step).
    func step<Result>(
        _ context: String,
        _ start: (UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        onResult: ((Int) -> Void)? = nil,
        read: @escaping (Int, UnsafeMutablePointer<uv_fs_t>) -> Result,
        discard: ((UnsafeMutablePointer<uv_fs_t>) -> Void)? = nil,
        failed: ((UVError) -> Void)? = nil,
        then: @escaping (Result) -> Void
    ) {
        guard isRunning else { return }
        guard loop.acceptsNewRequests else {
            finish(EventLoopError.shutDown(loop: loop.name))
            return
        }
        stepContext = context
        var outcome: Result?
        pending = .step(read: { [self] fs in
            let result = Int(fs.pointee.result)
            onResult?(result)
            guard result >= 0 else { return }
            if isRunning {
                outcome = read(result, fs)
            } else {
                discard?(fs)
            }
        }, completion: { [self] result in
            guard isRunning else {
                runReleases()
                return
            }
            if let value = outcome, result >= 0 {
                outcome = nil
                then(value)
            } else {
                let error = UVError(code: Int32(truncatingIfNeeded: result), context: context)
                if let failed { failed(error) } else { finish(error) }
            }
        })
        begin({ start($0, fileSystemRequestCallback) }, refused: { error in
            if let failed { failed(error) } else { finish(error) }
        })
    }

    /// `step` for a call whose result is only success or failure.
    func step(
        _ context: String,
        _ start: (UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        onResult: ((Int) -> Void)? = nil,
        discard: ((UnsafeMutablePointer<uv_fs_t>) -> Void)? = nil,
        failed: ((UVError) -> Void)? = nil,
        then: @escaping () -> Void
    ) {
        step(context, start, onResult: onResult, read: { _, _ in () }, discard: discard, failed: failed, then: { _ in then() })
    }

    // Called through the vtable, so generic: a stat's result would otherwise look up the metadata of
    // `Event<FileInfo>` at each send; `FileInfo` is the hot case (stat throughput).
    @_specialize(exported: false, where Value == FileInfo)
    override func requestFinished() {
        didFinish()
        let fs = pointer(as: uv_fs_t.self)
        let result = Int(fs.pointee.result)
        // Moved out, and consumed by the switch: the step's payload is not copied (a retain and release).
        var pending = PendingStep.none
        swap(&pending, &self.pending)
        switch consume pending {
        case .none:
            uv_fs_req_cleanup(fs)
        case .single(let signal):
            // The subscriber is moved out of `state` (copied, it was retained here and released by `end()`),
            // so the operation counts as ended while its value is delivered. Nothing but `dispose()` can end
            // it meanwhile (the request is no longer pending, and only the operation sends), and that
            // sets `disposedFlag` first, which only the operation's own end sets otherwise.
            var taken = State.ended
            swap(&taken, &state)
            guard case .running(let subscriber) = consume taken else {
                if result >= 0, let discard = signal.source.singleDiscard { discard(fs) }
                uv_fs_req_cleanup(fs)
                runReleases()
                return
            }
            // Bound by pattern, not `unsafelyUnwrapped` (through Optional's generic accessor the closure
            // is rewrapped in a reabstraction thunk, an allocation per call).
            guard result >= 0, let read = signal.source.singleRead else {
                uv_fs_req_cleanup(fs)
                endAfterState()
                subscriber.sendError(UVError(code: Int32(truncatingIfNeeded: result), context: signal.source.singleContext.description))
                return
            }
            // Read, then free what libuv allocated (nothing reuses this request: it was the operation's only one).
            let value = read(result, fs)
            uv_fs_req_cleanup(fs)
            subscriber.sendNext(value)
            // The value's callback may have disposed the subscription, which disposed the operation.
            if disposedFlag.load(ordering: .acquiring) { return }
            endAfterState()
            subscriber.sendCompleted()
        case .step(let read, let completion):
            read(fs)
            uv_fs_req_cleanup(fs)
            completion(result)
        }
    }
}

/// Checks at the door of every file-system signal, before any request.
enum FileSystemArguments {
    /// The largest mode: permission bits with set-user-ID, set-group-ID and sticky.
    static let largestMode: UInt32 = 0o7777

    /// Refuses an empty path (`ENOENT`, as `stat(2)` and every path call answer it: no file has the empty
    /// name) and one with a NUL byte (`EINVAL`: libuv takes C strings and would act on the part before the NUL).
    ///
    /// Inlined, with the refusal out of line: a path that passes costs the caller a test and the NUL search.
    @inline(__always)
    static func check(_ path: String, _ role: String = "path", in call: String) throws(UVError) {
        if path.isEmpty || nulOffset(in: path) != nil { try refuse(path, role, in: call) }
    }

    /// `check`'s refusal of `path`, which is empty or holds a NUL.
    @inline(never)
    private static func refuse(_ path: String, _ role: String, in call: String) throws(UVError) {
        if path.isEmpty {
            throw UVError(code: UVError.noSuchFileCode, message: "the \(role) is empty", context: call)
        }
        if let offset = nulOffset(in: path) {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "the \(role) contains a NUL byte (at byte \(offset)), which no file name can hold",
                          context: "\(call) \(path.replacingNULs)")
        }
    }

    /// Where the first NUL byte of `path` is, if it has one (memchr over a native string: this runs for every call).
    private static func nulOffset(in path: String) -> Int? {
        let found: Int?? = path.utf8.withContiguousStorageIfAvailable { bytes in
            guard let base = bytes.baseAddress, let hit = memchr(base, 0, bytes.count) else { return nil }
            return UnsafeRawPointer(hit) - UnsafeRawPointer(base)
        }
        if let found { return found }
        return path.utf8.firstIndex(of: 0).map { path.utf8.distance(from: path.utf8.startIndex, to: $0) }
    }

    /// Refuses a mode beyond 0o7777 (file type bits or garbage: chmod would silently drop them).
    static func check(mode: UInt32, in call: String) throws(UVError) {
        guard mode <= largestMode else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "mode 0o\(String(mode, radix: 8)) has bits beyond 0o7777 (permissions, set-ID and sticky)",
                          context: call)
        }
    }
}

extension String {
    /// The string with each NUL shown as `\0`, for messages.
    var replacingNULs: String {
        String(decoding: utf8.flatMap { $0 == 0 ? Array("\\0".utf8) : [$0] }, as: UTF8.self)
    }
}

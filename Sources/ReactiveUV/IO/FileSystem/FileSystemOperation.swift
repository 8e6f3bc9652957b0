internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One file-system signal's work for one subscriber: `uv_fs_*` requests made one after another on the loop thread.
///
/// Every file-system signal of `Files` (stat, mkdir, rename, a listing, a tree
/// removal...) runs through this type, one `FileRequest` per step:
/// - a step is started on the loop thread and its result is read there, from
///   the `uv_fs_t`, before libuv's cleanup frees what it allocated for it;
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
final class FileSystemOperation<Value>: LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable `loop` and the atomic `disposedFlag`.
    private enum State {
        case running(Subscriber<Value>)
        case ended
    }

    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private var state: State
    /// The pending request, if any: the operation's releases wait for its callback.
    private var request: FileRequest?
    /// What to undo at the end, newest last (closing what the steps opened).
    private var releases: [() -> Void] = []

    init(loop: EventLoop, subscriber: Subscriber<Value>) {
        self.loop = loop
        state = .running(subscriber)
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
        subscriber?.sendNext(value)
    }

    /// Registers `release` to run once at the end, however the operation ends (after any pending request called back).
    func onEnd(_ release: @escaping () -> Void) {
        releases.append(release)
    }

    /// Ends the operation: completes the subscriber, or fails it with `error`.
    func finish(_ error: (any Error)? = nil) {
        guard case .running(let subscriber) = state else { return }
        end()
        if let error { subscriber.sendError(error) } else { subscriber.sendCompleted() }
    }

    /// The subscription was disposed: stop without telling the subscriber.
    func abandon() {
        end()
    }

    private func end() {
        state = .ended
        if let request {
            // Its callback runs the releases: the request may still be using what they close.
            request.cancel()
        } else {
            runReleases()
        }
    }

    private func runReleases() {
        let releases = self.releases
        self.releases = []
        for release in releases.reversed() { release() }
    }

    /// Runs one request.
    ///
    /// - Parameters:
    ///   - context: The call and its path(s), for errors (`"mkdir /tmp/x"`).
    ///   - start: Starts the `uv_fs_*` call with the request and callback given.
    ///   - onResult: Told every result, also after the operation ended (bookkeeping of a descriptor being closed).
    ///   - read: Reads a successful result from the `uv_fs_t` (loop thread, before cleanup) while the operation runs.
    ///   - discard: Undoes a successful result that arrived after the operation ended (closes what it opened).
    ///   - failed: Handles a failure; by default the operation fails with it.
    ///   - then: Continues with what `read` made.
    func step<Result>(
        _ context: String,
        _ start: @escaping (UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
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
        let request = FileRequest(loop: loop, context: context)
        var outcome: Result?
        request.onShutdown = { [self] in finish(EventLoopError.shutDown(loop: loop.name)) }
        request.readResult = { [self] fs in
            let result = Int(fs.pointee.result)
            onResult?(result)
            guard result >= 0 else { return }
            if isRunning {
                outcome = read(result, fs)
            } else {
                discard?(fs)
            }
        }
        self.request = request
        do {
            try request.run(start) { [self] result in
                self.request = nil
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
            }
        } catch {
            self.request = nil
            if let failed { failed(error) } else { finish(error) }
        }
    }

    /// `step` for a call whose result is only success or failure.
    func step(
        _ context: String,
        _ start: @escaping (UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        onResult: ((Int) -> Void)? = nil,
        discard: ((UnsafeMutablePointer<uv_fs_t>) -> Void)? = nil,
        failed: ((UVError) -> Void)? = nil,
        then: @escaping () -> Void
    ) {
        step(context, start, onResult: onResult, read: { _, _ in () }, discard: discard, failed: failed, then: { _ in then() })
    }
}

/// Checks at the door of every file-system signal, before any request.
enum FileSystemArguments {
    /// The largest mode: permission bits with set-user-ID, set-group-ID and sticky.
    static let largestMode: UInt32 = 0o7777

    /// Refuses an empty path and one with a NUL byte (libuv takes C strings: it would act on the part before the NUL).
    static func check(_ path: String, _ role: String = "path", in call: String) throws(UVError) {
        if path.isEmpty {
            throw UVError(code: UVError.invalidArgumentCode, message: "the \(role) is empty", context: call)
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

extension Files {
    /// A cold file-system signal: the checks run when a subscriber arrives (an error there ends it before any
    /// request), then `body` starts the operation's first step on the loop thread.
    static func operation<Value>(
        _ call: String,
        on loop: EventLoop?,
        checks: () throws(UVError) -> Void,
        _ body: @escaping (FileSystemOperation<Value>) -> Void
    ) -> Signal<Value> {
        let refusal: UVError?
        do {
            try checks()
            refusal = nil
        } catch {
            refusal = error
        }
        // Run only on the loop thread, once per subscriber, by the signal's subscription.
        let body = UncheckedSendable(body)
        return Signal { subscriber in
            if let refusal {
                subscriber.sendError(refusal)
                return nil
            }
            return LoopBinding.open(on: loop, for: subscriber, what: "Files.\(call)") { loop in
                let operation = FileSystemOperation(loop: loop, subscriber: subscriber)
                body.value(operation)
                return operation
            }
        }.debugNamed("+Files.\(call)")
    }

    /// A signal of one request that sends what `read` makes of its result, then completes.
    static func single<Value>(
        _ call: String,
        context: String,
        on loop: EventLoop?,
        checks: () throws(UVError) -> Void,
        _ start: @escaping (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        read: @escaping (Int, UnsafeMutablePointer<uv_fs_t>) -> Value,
        discard: ((UnsafeMutablePointer<uv_fs_t>) -> Void)? = nil
    ) -> Signal<Value> {
        operation(call, on: loop, checks: checks) { operation in
            let uvLoop = operation.loop.uvLoop
            operation.step(context, { start(uvLoop, $0, $1) }, read: read, discard: discard) { value in
                operation.send(value)
                operation.finish()
            }
        }
    }

    /// A signal of one request that completes (with no value) when it succeeds.
    static func single(
        _ call: String,
        context: String,
        on loop: EventLoop?,
        checks: () throws(UVError) -> Void,
        _ start: @escaping (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32
    ) -> Signal<Void> {
        operation(call, on: loop, checks: checks) { operation in
            let uvLoop = operation.loop.uvLoop
            operation.step(context, { start(uvLoop, $0, $1) }) { operation.finish() }
        }
    }
}

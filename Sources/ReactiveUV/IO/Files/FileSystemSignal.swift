internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A cold file-system signal: each subscriber gets a `FileOperation` on the loop thread.
typealias FileSystemSignal<Value> = SourceSignal<FileSystemSource<Value>>

/// What a file-system signal runs for each subscriber: one request, or a body of steps.
///
/// A one-request signal subscribed with `subscribe(next:error:completed:)` on its loop takes the sink
/// lane (`HomeGate`'s rules): its operation sends to the subscription's own sink and is the subscription's
/// root, with no `Subscriber`. Every other subscriber gets a gate, hopped to the loop (`LoopBinding`).
///
/// Thread rule: safe from any thread (immutable); `attach` on the subscription's home thread.
struct FileSystemSource<Value>: SignalSource, @unchecked Sendable {
    // Every stored property is immutable; the closures run on the loop thread only.
    /// Starts a one-request signal's `uv_fs_*` call with the loop, the request, the context and the callback.
    typealias Start = (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<uv_fs_t>, FileCallContext, @escaping uv_fs_cb) -> Int32

    enum Work {
        /// One request; it sends the `stat` its `uv_fs_t` holds (`stat`, `lstat`), or only completes; `mode`: `access`, `chmod`.
        case request(start: Start, sendsStat: Bool, mode: UInt16)
        /// A longer operation: its steps, or its answer on a simulated loop.
        case steps(FileSteps<Value>)
    }

    let loop: EventLoop?
    /// The call and its path(s), which a `start` with no captures reads.
    let context: FileCallContext
    let work: Work

    // Called through the signal's vtable, so generic: specialized for the hot case (stat throughput).
    @_specialize(exported: false, where Value == FileInfo)
    static func attach(_ observer: Observer<Value>, to subscription: Subscription, signal: FileSystemSignal<Value>) {
        if case .sink = observer {
            // The observer is the subscription itself (not bound from the enum: that would retain it).
            let sink = unsafeDowncast(subscription, to: SinkSubscription<Value>.self)
            if let loop = sinkLane(sink, signal) {
                FileOperation.startSingle(signal, on: loop, sendingTo: sink)
                return
            }
        }
        let subscriber = Subscriber(observer: observer, subscription: subscription)
        subscription.attachRoot(subscriber)
        // As the base signal's attach: a subscription disposed before it attached starts nothing.
        if subscription.isDisposed { return }
        subscription.add(LoopBinding.open(on: signal.source.loop, for: subscriber, what: "Files.\(signal.source.context.call)") { loop in
            let operation = FileOperation(loop: loop, subscriber: subscriber)
            guard case .steps(let steps) = signal.source.work else {
                operation.single(signal)
                return operation
            }
            if let simulated = steps.simulated, loop.isSimulated { simulated(operation) } else { steps.body(operation) }
            return operation
        })
    }

    /// The loop on which a one-request signal's operation may send to the subscription's own sink with no
    /// gate (`HomeGate`'s rules), if it may: the observer is that sink (callbacks, no operator), on the
    /// thread of the home loop, which is the signal's loop.
    @inline(__always)
    private static func sinkLane(_ sink: SinkSubscription<Value>, _ signal: FileSystemSignal<Value>) -> EventLoop? {
        guard case .request = signal.source.work, let current = ThreadLocals.currentLoop.value,
              current == Unmanaged.passUnretained(sink.home).toOpaque() else { return nil }
        // Only a loop's thread names its loop there: the home is that loop.
        let loop = unsafeDowncast(sink.home, to: EventLoop.self)
        guard signal.source.loop.map({ $0 === loop }) ?? true, loop.acceptsNewHandles, !sink.isDisposed else { return nil }
        return loop
    }

    /// Starts a one-request signal's request.
    @inline(__always)
    func start(_ loop: UnsafeMutablePointer<uv_loop_t>, _ request: UnsafeMutablePointer<uv_fs_t>) -> Int32 {
        guard case .request(let start, _, _) = work else { return UVError.invalidArgumentCode }
        return start(loop, request, context, fileSystemRequestCallback)
    }
}

extension FileOperation {
    /// A one-request signal's operation on the sink lane (`FileSystemSource.attach`): it sends to `sink`,
    /// the subscription itself, and is its root (attached after the start, which may have ended it already).
    static func startSingle(_ signal: FileSystemSignal<Value>, on loop: consuming EventLoop, sendingTo sink: SinkSubscription<Value>) {
        let operation = FileOperation(loop: loop, output: .gate(.sink(sink)))
        operation.single(signal)
        sink.attachRoot(consume operation)
    }
}

/// What a file-system call is doing, for its errors and labels: `"stat /tmp/x"`, `"rename a -> b"`.
/// Kept as its parts and written out only for an error or a message.
///
/// Thread rule: a value type; safe from any thread.
struct FileCallContext: Sendable, CustomStringConvertible {
    /// The system call's name (`"stat"`).
    let call: StaticString
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

extension Files {
    /// The error `checks` throw, if any: how every `Files` call turns its door checks into an error to send.
    static func refusal(_ checks: () throws(UVError) -> Void) -> UVError? {
        do {
            try checks()
            return nil
        } catch {
            return error
        }
    }

    /// `ENOENT` for an empty path, `EINVAL` for one with a NUL byte, else nil.
    static func pathRefusal(of path: String, in call: String) -> UVError? {
        refusal { () throws(UVError) in try FileSystemArguments.check(path, in: call) }
    }

    /// A cold file-system signal: `checks` run when it is made (their error fails each subscriber before
    /// any request), then `body` starts the operation's first step on the loop thread (`simulated` on a simulated loop).
    static func operation<Value>(_ call: StaticString, on loop: EventLoop?, checks: () throws(UVError) -> Void,
                                 simulated: ((FileOperation<Value>) -> Void)? = nil,
                                 _ body: @escaping (FileOperation<Value>) -> Void) -> Signal<Value> {
        if let refusal = refusal(checks) { return Signal.error(refusal).debugNamed("+Files.\(call)") }
        return FileSystemSignal(FileSystemSource(loop: loop, context: FileCallContext(call, ""), work: .steps(FileSteps(body: body, simulated: simulated))))
            .debugNamed("+Files.\(call)")
    }

    /// A signal of one request: `start` is given the loop, the request, `context` (whose paths a closure with
    /// no captures can use) and the callback. `sendsStat` (Value is `FileInfo`) sends the `stat` result.
    private static func single<Value>(_ context: consuming FileCallContext, on loop: EventLoop?, checks: () throws(UVError) -> Void,
                                      sendsStat: Bool, mode: UInt16 = 0, _ start: @escaping FileSystemSource<Value>.Start) -> Signal<Value> {
        let call = context.call
        if let refusal = refusal(checks) { return Signal.error(refusal).debugNamed("+Files.\(call)") }
        return FileSystemSignal(FileSystemSource(loop: loop, context: context, work: .request(start: start, sendsStat: sendsStat, mode: mode)))
            .debugNamed("+Files.\(call)")
    }

    /// A signal of one `stat`-like request that sends the `FileInfo` it reads, then completes.
    static func statRequest(_ context: consuming FileCallContext, on loop: EventLoop?, checks: () throws(UVError) -> Void,
                            _ start: @escaping FileSystemSource<FileInfo>.Start) -> Signal<FileInfo> {
        single(context, on: loop, checks: checks, sendsStat: true, start)
    }

    /// A signal of one request that completes (with no value) when it succeeds.
    static func single(_ context: consuming FileCallContext, on loop: EventLoop?, mode: UInt16 = 0, checks: () throws(UVError) -> Void,
                       _ start: @escaping FileSystemSource<Void>.Start) -> Signal<Void> {
        single(context, on: loop, checks: checks, sendsStat: false, mode: mode, start)
    }
}

/// Checks at the door of every file-system signal, before any request.
enum FileSystemArguments {
    /// Refuses an empty path (`ENOENT`, as `stat(2)` answers it) and one with a NUL byte (`EINVAL`:
    /// libuv takes C strings and would act on the part before the NUL).
    ///
    /// Inlined, with the refusal out of line: a path that passes costs the caller a test and the NUL search.
    @inline(__always)
    static func check(_ path: String, _ role: String = "path", in call: String) throws(UVError) {
        if path.isEmpty || nulOffset(in: path) != nil { try refuse(path, role, in: call) }
    }

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

    /// Where the first NUL byte of `path` is, if it has one.
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
        guard mode <= 0o7777 else {
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

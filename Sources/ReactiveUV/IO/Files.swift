internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reading and writing files through libuv's file requests (`uv_fs_*` on the thread pool).
///
/// Each signal opens the file when a subscriber arrives and closes it when
/// it ends or is disposed. Errors (`ENOENT`, `EACCES`, `EISDIR`, `ENOSPC`...)
/// end the signal with a `UVError` naming the call and the path.
///
/// Thread rule: safe from any thread.
public enum Files {
    /// Reads the whole file and sends it as one array, then completes.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal of one array.
    ///
    /// Thread rule: safe from any thread.
    public static func read(_ path: String, on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "Files.read") { loop in
                FileTransfer.start(FileTransfer(loop: loop, path: path, mode: .readAll, subscriber: subscriber))
            }
        }.debugNamed("+Files.read(\(path))")
    }

    /// Streams the file in chunks of at most `chunkSize` bytes, then completes at its end.
    ///
    /// One read request is in flight at a time; disposing stops after it.
    ///
    /// - Parameters:
    ///   - path: The file (or a FIFO or device: chunks then come as they are read).
    ///   - chunkSize: The largest chunk, at least 1 (default 64 KiB).
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal of chunks.
    ///
    /// Thread rule: safe from any thread.
    public static func chunks(_ path: String, chunkSize: Int = 65_536, on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "Files.chunks") { loop in
                FileTransfer.start(FileTransfer(loop: loop, path: path, mode: .stream(max(1, chunkSize)), subscriber: subscriber))
            }
        }.debugNamed("+Files.chunks(\(path))")
    }

    /// Writes `bytes` to the file, creating it (mode 0644) or replacing its contents, then completes.
    ///
    /// - Parameters:
    ///   - bytes: The contents.
    ///   - path: The file.
    ///   - append: Add to the end instead of replacing the contents.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal that completes once every byte was written.
    ///
    /// Thread rule: safe from any thread.
    public static func write(_ bytes: [UInt8], to path: String, append: Bool = false, on loop: EventLoop? = nil) -> Signal<Void> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "Files.write") { loop in
                FileTransfer.start(FileTransfer(loop: loop, path: path, mode: .write(bytes, append: append), subscriber: subscriber))
            }
        }.debugNamed("+Files.write(\(path))")
    }
}

/// One file subscription: open, read or write step by step, close.
final class FileTransfer: Disposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposed`.
    enum Mode {
        case readAll
        case stream(Int)
        case write([UInt8], append: Bool)
    }

    private let loop: EventLoop
    private let path: String
    private let mode: Mode
    /// Receives the data read (the whole file, or each chunk); nil once the transfer ended or was disposed.
    private var deliver: (([UInt8]) -> Void)?
    /// Receives the end: nil for success.
    private var end: (((any Error)?) -> Void)?
    private var request: FileRequest?
    private var file: uv_file = -1
    private var buffer: UnsafeMutableRawPointer?
    private var bufferSize = 0
    private var contents: [UInt8] = []
    private var written = 0
    private let disposed = Atomic<Bool>(false)

    /// A transfer that reads into `subscriber`.
    convenience init(loop: EventLoop, path: String, mode: Mode, subscriber: Subscriber<[UInt8]>) {
        self.init(loop: loop, path: path, mode: mode, deliver: { subscriber.sendNext($0) }, end: { error in
            if let error { subscriber.sendError(error) } else { subscriber.sendCompleted() }
        })
    }

    /// A transfer that writes and reports only its end to `subscriber`.
    convenience init(loop: EventLoop, path: String, mode: Mode, subscriber: Subscriber<Void>) {
        self.init(loop: loop, path: path, mode: mode, deliver: { _ in }, end: { error in
            if let error { subscriber.sendError(error) } else { subscriber.sendCompleted() }
        })
    }

    private init(loop: EventLoop, path: String, mode: Mode,
                 deliver: @escaping ([UInt8]) -> Void, end: @escaping ((any Error)?) -> Void) {
        self.loop = loop
        self.path = path
        self.mode = mode
        self.deliver = deliver
        self.end = end
    }

    deinit {
        buffer?.deallocate()
    }

    /// Starts the transfer and returns it as the subscription's disposable.
    static func start(_ transfer: FileTransfer) -> (any Disposable)? {
        transfer.open()
        return transfer
    }

    private func open() {
        let flags: Int32
        switch mode {
        case .readAll, .stream: flags = O_RDONLY
        case .write(_, let append): flags = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC)
        }
        step("open \(path)") { request, callback in
            uv_fs_open(self.loop.uvLoop, request, self.path, flags, 0o644, callback)
        } then: { [self] result in
            file = uv_file(result)
            next()
        }
    }

    /// The next read or write, or the end.
    private func next() {
        switch mode {
        case .readAll, .stream:
            read()
        case .write(let bytes, _):
            if written >= bytes.count {
                finish(nil)
            } else {
                writeRest(of: bytes)
            }
        }
    }

    private func read() {
        if buffer == nil {
            if case .stream(let size) = mode { bufferSize = size } else { bufferSize = 65_536 }
            buffer = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: 16)
        }
        let base = buffer!
        step("read \(path)") { [self] request, callback in
            var slice = uv_buf_init(base.assumingMemoryBound(to: CChar.self), UInt32(bufferSize))
            return uv_fs_read(loop.uvLoop, request, file, &slice, 1, -1, callback)
        } then: { [self] count in
            if count == 0 {
                if case .readAll = mode { deliver?(contents) }
                finish(nil)
                return
            }
            let chunk = UnsafeRawBufferPointer(start: base, count: count)
            if case .readAll = mode {
                contents.append(contentsOf: chunk)
            } else {
                deliver?([UInt8](chunk))
            }
            if end != nil { read() }
        }
    }

    private func writeRest(of bytes: [UInt8]) {
        step("write \(path)") { [self] request, callback in
            bytes.withUnsafeBytes { all in
                // libuv copies the uv_buf_t; the bytes stay put because `mode` holds the array.
                var slice = uv_buf_init(UnsafeMutableRawPointer(mutating: all.baseAddress! + written).assumingMemoryBound(to: CChar.self),
                                        UInt32(bytes.count - written))
                return uv_fs_write(loop.uvLoop, request, file, &slice, 1, -1, callback)
            }
        } then: { [self] count in
            written += count
            next()
        }
    }

    /// Runs one request; `then` gets its non-negative result, a negative one ends the transfer.
    private func step(
        _ context: String,
        _ start: (UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        then: @escaping (Int) -> Void
    ) {
        guard end != nil else {
            finish(nil)
            return
        }
        let request = FileRequest(loop: loop, context: context)
        request.onShutdown = { [self] in shutDown() }
        self.request = request
        do {
            try request.run(start) { [self] result in
                self.request = nil
                if end == nil {
                    finish(nil)
                } else if result < 0 {
                    finish(UVError(code: Int32(result), context: context))
                } else {
                    then(result)
                }
            }
        } catch {
            self.request = nil
            finish(error)
        }
    }

    /// Closes the file (synchronously: a close of a local file does not block) and tells the subscriber.
    private func finish(_ error: (any Error)?) {
        if file >= 0 {
            var close = uv_fs_t()
            uvCheckReporting(uv_fs_close(nil, &close, file, nil), "close \(path)")
            uv_fs_req_cleanup(&close)
            file = -1
        }
        let end = self.end
        self.end = nil
        deliver = nil
        end?(error)
    }

    /// A pending request's `cancelForShutdown` (which cancels it): the subscriber learns the loop went away.
    private func shutDown() {
        let end = self.end
        self.end = nil
        deliver = nil
        end?(EventLoopError.shutDown(loop: loop.name))
    }

    func dispose() {
        guard !disposed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if loop.inEventLoop {
            abandon()
        } else {
            // After shutdown the pending request was cancelled and the file closed, so a refused hop loses nothing.
            _ = loop.enqueue { [self] in abandon() }
        }
    }

    /// Stops: a pending request is cancelled if it has not started; its callback closes the file.
    private func abandon() {
        end = nil
        deliver = nil
        if let request {
            request.cancel()
        } else if file >= 0 {
            finish(nil)
        }
    }

    var isDisposed: Bool { disposed.load(ordering: .acquiring) }
}

/// One `uv_fs_t` with a completion closure.
final class FileRequest: LoopRequest {
    // Loop thread only.
    private let context: String
    private var completion: ((Int) -> Void)?
    /// Told about a loop shutdown while this request is pending.
    var onShutdown: (() -> Void)?

    init(loop: EventLoop, context: String) {
        self.context = context
        super.init(loop: loop, type: UV_FS)
    }

    override var label: String { context }

    func run(_ start: (UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32, completion: @escaping (Int) -> Void) throws(UVError) {
        self.completion = completion
        let request = pointer(as: uv_fs_t.self)
        do {
            try self.start(context) { start(request, fileRequestCallback) }
        } catch {
            self.completion = nil
            throw error
        }
    }

    fileprivate func finish() {
        didFinish()
        let fs = pointer(as: uv_fs_t.self)
        let result = fs.pointee.result
        uv_fs_req_cleanup(fs)
        let completion = self.completion
        self.completion = nil
        onShutdown = nil
        completion?(result)
    }

    override func cancelForShutdown() {
        let onShutdown = self.onShutdown
        self.onShutdown = nil
        cancel()
        onShutdown?()
    }
}

private let fileRequestCallback: uv_fs_cb = { request in
    guard let data = request?.pointee.data else { return }
    Unmanaged<FileRequest>.fromOpaque(data).takeRetainedValue().finish()
}

internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One `Files.chunks` or `Files.write` subscription: open, read or write step by step, close.
///
/// What `Files.chunks` opened is read by whichever reader suits it: a regular file by `OpenFile.chunks`'s
/// reader with its reads ahead (`ChunkedFileRead`), a FIFO by the stream core (`FIFOStream`), anything
/// else (a device) one read at a time here, as is standard input handed over by `startReading`, which
/// must read from the descriptor's current offset and move it.
final class FileTransfer: LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.
    enum Mode {
        case stream(chunkSize: Int)
        case write(WriteBytes, append: Bool, largestRequest: Int)
    }

    /// The most bytes one write request hands libuv: `uv_buf_t` lengths pass through `unsigned int`
    /// (`uv_buf_init`), and Linux writes at most 2 GiB − 4 KiB per call anyway.
    static let largestWriteRequest = 1 << 30

    let loop: EventLoop
    private let path: String
    private let mode: Mode
    /// Receives each chunk read; nil once the transfer ended or was disposed.
    private var deliver: (([UInt8]) -> Void)?
    /// Receives the end: nil for success.
    private var end: (((any Error)?) -> Void)?
    private var request: FileRequest?
    private var file: uv_file = -1
    /// The reading subscriber, which a FIFO's stream takes over (see `readFIFO`); nil for a write.
    private var reader: Subscriber<[UInt8]>?
    /// Reads a FIFO on the loop through the stream core (it owns the descriptor then: `file` is -1).
    private var fifo: (any Disposable)?
    /// A regular file opened here, read ahead by `ChunkedFileRead` (the `OpenFile` owns the descriptor then: `file` is -1).
    private var regularFile: (file: OpenFile, reading: (any Disposable)?)?
    /// Opened here (not a descriptor handed over by `startReading`): a regular file may be read at offsets.
    private var openedHere = false
    /// Ends the transfer at the loop's shutdown when no request is pending (a read its consumer paused):
    /// a pending request hears of it itself (`FileRequest.onShutdown`), an idle transfer would not.
    private var shutdownRegistration: (any Disposable)?
    private var buffer: UnsafeMutableRawPointer?
    private var bufferSize = 0
    private var written = 0
    /// The consumer asked to pause (only `startReading` lets it): no read request starts meanwhile.
    private var paused = false
    /// A chunk was delivered while paused: the next read starts on resume.
    private var readWaits = false
    let disposedFlag = Atomic<Bool>(false)

    /// A transfer that reads into `subscriber`.
    convenience init(loop: EventLoop, path: String, mode: Mode, subscriber: Subscriber<[UInt8]>) {
        self.init(loop: loop, path: path, mode: mode, deliver: { subscriber.sendNext($0) }, end: { error in
            if let error { subscriber.sendError(error) } else { subscriber.sendCompleted() }
        })
        reader = subscriber
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
        free(buffer)
    }

    /// Starts the transfer and returns it as the subscription's disposable.
    static func start(_ transfer: FileTransfer) -> (any Disposable)? {
        guard transfer.followShutdown() else { return transfer }
        transfer.open()
        return transfer
    }

    /// Registers for the loop's shutdown (loop thread); false if it already began, the transfer then ended.
    private func followShutdown() -> Bool {
        // Strong, as the flow control's: `finish()` drops the registration.
        shutdownRegistration = loop.shutdownObservers.add { self.loopShutDown() }
        guard shutdownRegistration == nil else { return true }
        finish(EventLoopError.shutDown(loop: loop.name))
        return false
    }

    /// The loop shuts down (loop thread): an idle transfer (paused, with no request pending) closes the file and
    /// tells its subscriber now; a FIFO's stream and a regular file's reader tell it themselves (`end` is nil then).
    private func loopShutDown() {
        shutdownRegistration = nil
        // Handed over (`end` is nil): the FIFO's stream or the file's reader must be left to say it.
        guard request == nil, end != nil else { return }
        finish(EventLoopError.shutDown(loop: loop.name))
    }

    /// Starts reading `descriptor`, already open (a duplicate of standard input): the transfer owns it
    /// and closes it at the end. Reads start at the descriptor's current offset, as a shell expects.
    ///
    /// `subscriber` can pause the reads (a full `signal.values` buffer does): the next read
    /// request waits until it resumes, as a stream's reading does.
    static func startReading(_ transfer: FileTransfer, descriptor: uv_file, pausable subscriber: Subscriber<[UInt8]>) -> (any Disposable)? {
        // Strong captures, as the stream's: the cycle ends when the subscription's teardown drops the flow control.
        subscriber.setFlowControl(pause: { transfer.setPaused(true) }, resume: { transfer.setPaused(false) })
        transfer.file = descriptor
        guard transfer.followShutdown() else { return transfer }
        transfer.examine()
        return transfer
    }

    /// A consumer's pause or resume (loop thread): a resume starts the read that waited for it.
    private func setPaused(_ paused: Bool) {
        self.paused = paused
        if !paused && readWaits && end != nil {
            readWaits = false
            read()
        }
    }

    private func open() {
        // O_NONBLOCK: opening a FIFO must not wait for its other end on a pool thread (see `Files`).
        let flags: Int32
        switch mode {
        case .stream: flags = O_RDONLY | O_NONBLOCK
        case .write(_, let append, _): flags = O_WRONLY | O_CREAT | O_NONBLOCK | (append ? O_APPEND : O_TRUNC)
        }
        step("open \(path)") { request, callback in
            uv_fs_open(self.loop.uvLoop, request, self.path, flags, 0o644, callback)
        } then: { [self] result, _ in
            file = uv_file(result)
            openedHere = true
            switch mode {
            case .stream: examine()
            case .write:
                // Writes to a FIFO whose reader exists wait for room, as the caller expects.
                setBlocking()
                next()
            }
        } failed: { [self] error in
            guard error.code == UV_ENXIO.rawValue, case .write = mode else { return error }
            return UVError(code: error.code, message: "the FIFO has no reader (it is opened without waiting for one)", context: error.context)
        }
    }

    /// `fstat`s the file just opened for reading: a FIFO is read on the loop, anything else on the pool.
    private func examine() {
        step("fstat \(path)") { [self] request, callback in
            uv_fs_fstat(loop.uvLoop, request, file, callback)
        } then: { [self] _, request in
            let type = mode_t(truncatingIfNeeded: request.statMode) & S_IFMT
            if type == S_IFIFO {
                readFIFO()
                return
            }
            if type == S_IFREG && openedHere {
                readRegularFile()
                return
            }
            if type != S_IFREG { setBlocking() }
            guard case .stream(let chunkSize) = mode else { return }
            // A small regular file does not need a buffer of the whole chunk size.
            let size = type == S_IFREG ? Int(clamping: request.statSize) : chunkSize
            bufferSize = min(chunkSize, max(size, 65_536))
            guard let buffer = malloc(bufferSize) else {
                finish(UVError(code: UV_ENOMEM.rawValue, message: "cannot allocate a buffer of \(bufferSize) bytes", context: "read \(path)"))
                return
            }
            self.buffer = buffer
            read()
        }
    }

    /// Clears `O_NONBLOCK` (a device or a FIFO with a reader: its reads and writes should wait, not fail with EAGAIN).
    private func setBlocking() {
        let flags = fcntl(file, F_GETFL)
        if flags >= 0 && flags & O_NONBLOCK != 0 { _ = fcntl(file, F_SETFL, flags & ~O_NONBLOCK) }
    }

    /// Hands the FIFO's descriptor and the subscriber to a stream: its chunks, pauses and end are the stream core's from here.
    private func readFIFO() {
        guard case .stream(let chunkSize) = mode, let reader else { return }
        let descriptor = file
        file = -1  // the stream owns it from here (it closes it, also when it fails to start)
        // The stream tells the subscriber everything from now on; this transfer only stops it on disposal.
        end = nil
        deliver = nil
        fifo = FIFOStream.read(descriptor: descriptor, path: path, chunkLimit: chunkSize, what: "Files.chunks", on: loop, into: reader)
    }

    /// Hands the regular file's descriptor and the subscriber to `OpenFile.chunks`'s reader, which keeps
    /// reads ahead on the pool (twice the rate of one read at a time); it tells the subscriber everything from
    /// here, and this transfer closes the file when the subscription ends (`abandon`, or the loop's shutdown).
    private func readRegularFile() {
        guard case .stream(let chunkSize) = mode, let reader else { return }
        let opened = OpenFile(loop: loop, path: path, descriptor: file)
        file = -1
        end = nil
        deliver = nil
        regularFile = (opened, nil)
        regularFile?.reading = ChunkedFileRead(file: opened, offset: 0, chunkSize: chunkSize, subscriber: reader).start()
    }

    /// The next write, or the end.
    private func next() {
        guard case .write(let bytes, _, _) = mode else { return }
        if written >= bytes.count {
            finish(nil)
        } else {
            writeRest(of: bytes)
        }
    }

    private func read() {
        guard let base = buffer, let length = UInt32(exactly: bufferSize) else {
            finish(UVError(code: UVError.invalidArgumentCode, message: "a read buffer of \(bufferSize) bytes", context: "read \(path)"))
            return
        }
        step("read \(path)") { [self] request, callback in
            var slice = uv_buf_init(base.assumingMemoryBound(to: CChar.self), length)
            return uv_fs_read(loop.uvLoop, request, file, &slice, 1, -1, callback)
        } then: { [self] count, _ in
            if count == 0 {
                finish(nil)
                return
            }
            deliver?([UInt8](UnsafeRawBufferPointer(start: base, count: count)))
            guard end != nil else { return }
            if paused {
                readWaits = true
            } else {
                read()
            }
        }
    }

    private func writeRest(of bytes: WriteBytes) {
        guard case .write(_, _, let largestRequest) = mode,
              let length = UInt32(exactly: min(bytes.count - written, largestRequest)) else {
            finish(UVError(code: UVError.invalidArgumentCode, message: "a write request larger than libuv's 32-bit lengths", context: "write \(path)"))
            return
        }
        step("write \(path)") { [self] request, callback in
            bytes.withBytes { all in
                // libuv copies the uv_buf_t; the bytes stay put because `mode` holds them.
                var slice = uv_buf_init(UnsafeMutableRawPointer(mutating: all.baseAddress! + written).assumingMemoryBound(to: CChar.self),
                                        length)
                return uv_fs_write(loop.uvLoop, request, file, &slice, 1, -1, callback)
            }
        } then: { [self] count, _ in
            guard count > 0 else {
                // Asking again would loop for ever.
                finish(UVError(code: UV_EIO.rawValue, message: "the file accepted none of \(length) bytes", context: "write \(path)"))
                return
            }
            written += count
            next()
        }
    }

    /// Runs one request; `then` gets its non-negative result, a negative one ends the transfer
    /// (with the error `failed` makes of it, by default the error itself).
    private func step(
        _ context: String,
        _ start: (UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32,
        then: @escaping (Int, FileRequest) -> Void,
        failed: @escaping (UVError) -> UVError = { $0 }
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
                    finish(failed(UVError(code: Int32(truncatingIfNeeded: result), context: context)))
                } else {
                    then(result, request)
                }
            }
        } catch {
            self.request = nil
            finish(failed(error))
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
        fifo?.dispose()
        fifo = nil
        if let (opened, reading) = regularFile {
            regularFile = nil
            reading?.dispose()
            opened.requestClose(by: .dispose)
        }
        shutdownRegistration?.dispose()
        shutdownRegistration = nil
        tellEnd(error)
    }

    /// A pending request's `cancelForShutdown` (which cancels it): the subscriber learns the loop went away.
    private func shutDown() {
        tellEnd(EventLoopError.shutDown(loop: loop.name))
    }

    /// Drops the closures, then tells the subscriber how the transfer ended (once).
    private func tellEnd(_ error: (any Error)?) {
        let end = self.end
        self.end = nil
        deliver = nil
        reader = nil
        end?(error)
    }

    /// Stops: a pending request is cancelled if it has not started; its callback closes the file.
    func abandon() {
        end = nil
        deliver = nil
        reader = nil
        if let request {
            request.cancel()
        } else if file >= 0 || fifo != nil || regularFile != nil {
            finish(nil)
        }
    }
}

/// One `uv_fs_t` with a completion closure.
final class FileRequest: LoopRequest {
    // Loop thread only.
    private let context: String
    private var completion: ((Int) -> Void)?
    /// Told about a loop shutdown while this request is pending.
    var onShutdown: (() -> Void)?
    /// Reads what the finished request left in its `uv_fs_t` (a stat buffer, a path, directory entries),
    /// whatever the result, before `uv_fs_req_cleanup` frees what libuv allocated for it.
    var readResult: ((UnsafeMutablePointer<uv_fs_t>) -> Void)?
    /// `st_mode` and `st_size` of a finished `uv_fs_fstat` (read before the request is cleaned up).
    private(set) var statMode: UInt64 = 0
    private(set) var statSize: UInt64 = 0

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
        if fs.pointee.fs_type == UV_FS_FSTAT && result >= 0 {
            statMode = fs.pointee.statbuf.st_mode
            statSize = fs.pointee.statbuf.st_size
        }
        let readResult = self.readResult
        self.readResult = nil
        readResult?(fs)
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

internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `Files.chunks` opened, or a file or device handed over as standard input, read by what it is: a FIFO
/// as a stream (`FIFOStream`), a regular file opened here by `ChunkedFileRead`, anything else one read at a
/// time in pool jobs from the descriptor's current offset (as a shell expects of standard input).
final class ChunkReading: @unchecked Sendable {
    // Loop thread only, as its operation; the buffer is the pool job's while one is out, freed once none can be.
    private let operation: FileOperation<[UInt8]>
    private let path: String
    private let chunkSize: Int
    /// Opened by `Files.chunks` (not handed over): a regular file may then be read at offsets.
    private let openedHere: Bool
    /// The descriptor while this owns it (-1 once handed to a stream or a reader).
    private var file: Int32
    private var buffer: UnsafeMutableRawPointer?
    private var bufferSize = 0
    private var paused = false
    /// A chunk was delivered while paused: the next read starts on resume.
    private var readWaits = false

    init(operation: FileOperation<[UInt8]>, path: String, file: Int32, chunkSize: Int, openedHere: Bool) {
        self.operation = operation
        self.path = path
        self.file = file
        self.chunkSize = chunkSize
        self.openedHere = openedHere
        // Weak: the operation outlives a handover (FIFO, regular file) until it is disposed, which a
        // loop that has shut down never runs; a strong capture would keep both, and the loop, forever.
        operation.onEnd { [weak self] in self?.release() }
    }

    deinit { release() }

    /// Closes the descriptor this still owns and frees the buffer (once no pool job uses it: a job holds this).
    private func release() {
        if file >= 0 { Files.closeNow(file) }
        file = -1
        free(buffer)
        buffer = nil
    }

    /// `fstat`s the descriptor: a FIFO is read on the loop, anything else on the pool.
    func examine() {
        operation.request("fstat \(path)", { uv_fs_fstat($0, $1, file, $2) }, read: { _, fs in
            (mode_t(truncatingIfNeeded: fs.pointee.statbuf.st_mode) & S_IFMT, Int(clamping: fs.pointee.statbuf.st_size))
        }) { [self] type, size in
            if type == S_IFIFO { return readFIFO() }
            if type == S_IFREG && openedHere { return readRegularFile() }
            // A device opened with O_NONBLOCK would fail with EAGAIN where the reader expects it to wait.
            if type != S_IFREG { Files.setBlocking(file) }
            // A small regular file does not need a buffer of the whole chunk size.
            bufferSize = min(chunkSize, max(type == S_IFREG ? size : chunkSize, 65_536))
            guard let buffer = malloc(bufferSize) else {
                return operation.finish(UVError(code: UV_ENOMEM.rawValue, message: "cannot allocate a buffer of \(bufferSize) bytes",
                                                context: "read \(path)"))
            }
            self.buffer = buffer
            operation.subscriber?.setFlowControl(pause: { [self] in paused = true }, resume: { [self] in
                paused = false
                if readWaits {
                    readWaits = false
                    read()
                }
            })
            // A paused reader has no step pending, so the loop's shutdown would not reach it through one.
            if operation.followShutdown() { read() }
        }
    }

    /// Hands the FIFO and the subscriber to a stream: its chunks, pauses and end are the stream core's from here.
    private func readFIFO() {
        guard let reader = operation.subscriber else { return }
        let descriptor = file
        file = -1  // the stream owns it from here (it closes it, also when it fails to start)
        operation.detach()
        let reading = FIFOStream.read(descriptor: descriptor, path: path, chunkLimit: chunkSize, what: "Files.chunks", on: operation.loop, into: reader)
        if let reading { operation.onEnd { reading.dispose() } }
    }

    /// Hands the regular file and the subscriber to `OpenFile.chunks`'s reader; the file closes at the end.
    private func readRegularFile() {
        guard let reader = operation.subscriber else { return }
        let opened = OpenFile(loop: operation.loop, path: path, descriptor: file)
        file = -1
        operation.detach()
        let reading = ChunkedFileRead(file: opened, offset: 0, chunkSize: chunkSize, subscriber: reader).start()
        operation.onEnd {
            reading?.dispose()
            opened.requestClose(by: .dispose)
        }
    }

    /// One read into the buffer on the pool, copied out at its length; an empty chunk is the end.
    private func read() {
        guard let buffer else { return }
        let (descriptor, size, context, base) = (file, bufferSize, "read \(path)", UncheckedSendable(buffer))
        operation.job(context, { _ in
            while true {
                let count = Glibc.read(descriptor, base.value, size)
                if count >= 0 { return [UInt8](UnsafeRawBufferPointer(start: base.value, count: count)) }
                if errno != EINTR { throw systemCallError(context) }
            }
        }) { [self] chunk in
            if chunk.isEmpty { return operation.finish() }
            operation.send(chunk)
            if paused { readWaits = true } else { read() }
        }
    }
}

extension Files {
    /// Reads `descriptor` (standard input's file or device, taken over) into `subscriber` from its current offset.
    static func readChunks(of descriptor: Int32, name: String, chunkSize: Int, on loop: EventLoop,
                           into subscriber: Subscriber<[UInt8]>) -> any Disposable {
        let operation = FileOperation(loop: loop, subscriber: subscriber)
        ChunkReading(operation: operation, path: name, file: descriptor, chunkSize: chunkSize, openedHere: false).examine()
        return operation
    }

    /// Closes `file` now, on the loop thread (a close of a local file does not block).
    static func closeNow(_ file: uv_file) {
        runNow("close") { uv_fs_close(nil, $0, file, nil) }
    }

    /// Runs a `uv_fs_*` call synchronously, reporting a failure: for cleanup nobody waits on.
    static func runNow(_ context: @autoclosure () -> String, _ call: (UnsafeMutablePointer<uv_fs_t>) -> Int32) {
        var request = uv_fs_t()
        uvCheckReporting(call(&request), context())
        uv_fs_req_cleanup(&request)
    }

    /// Runs a `uv_fs_*` call synchronously (pool thread), throwing its failure; `read` reads the finished request.
    static func callNow<Result>(_ context: @autoclosure () -> String, _ call: (UnsafeMutablePointer<uv_fs_t>) -> Int32,
                                read: (Int32, UnsafeMutablePointer<uv_fs_t>) -> Result) throws(UVError) -> Result {
        var request = uv_fs_t()
        defer { uv_fs_req_cleanup(&request) }
        let result = call(&request)
        guard result >= 0 else { throw UVError(code: result, context: context()) }
        return read(result, &request)
    }

    /// Clears `O_NONBLOCK`, which only kept an `open` from waiting for a FIFO's other end.
    static func setBlocking(_ descriptor: Int32) {
        let flags = fcntl(descriptor, F_GETFL)
        if flags >= 0 && flags & O_NONBLOCK != 0 { _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) }
    }
}

extension FileOperation {
    /// Opens `path` with a `uv_fs_open` request, then `then`; one opened after the operation ended is closed.
    func open(_ path: String, flags: Int32, mode: Int32 = 0, failed: ((UVError) -> Void)? = nil, then: @escaping (uv_file) -> Void) {
        request("open \(path)", { uv_fs_open($0, $1, path, flags, mode, $2) }, read: { result, _ in uv_file(truncatingIfNeeded: result) },
                discard: { fs in Files.closeNow(uv_file(truncatingIfNeeded: fs.pointee.result)) }, failed: failed, then: then)
    }
}

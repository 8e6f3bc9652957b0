internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `Files.read`: the whole file, read on a pool thread straight into the array that is delivered.
///
/// Growing an array on the loop thread chunk by chunk copied everything read so
/// far at each regrowth (seconds of stall for a 1.5 GB file, unbounded on
/// `/dev/zero`). Here one pool job opens the file with `O_NONBLOCK` (so a FIFO
/// never blocks it), `fstat`s it, and:
/// - a regular file of known size larger than `maxSize` is refused (`EFBIG`)
///   before anything is read; otherwise it is read into an array allocated at
///   that size, `readSize` bytes per system call with a disposal check between
///   calls, then read on in case it grew meanwhile;
/// - a source of unknown size (a device such as `/dev/zero`, `/proc` files) is
///   appended to (geometric growth, on the pool thread) until EOF, and refused
///   with `EFBIG` once more than `maxSize` bytes came;
/// - a FIFO's descriptor goes back to the loop, which reads it through the
///   stream core (`FIFOStream`: epoll, no pool thread) and joins the chunks once, at EOF.
/// The loop thread runs one callback for the whole read (the delivery).
final class WholeFileRead: PoolWorkBase, LoopDisposable, @unchecked Sendable {
    // `path`, `maxSize`, `readSize` and `afterEachRead` are immutable; `stopped` and `disposedFlag` are atomic; `outcome` is
    // written on the pool thread and read on the loop thread after libuv hands the request back (its queue
    // mutex orders the two); `state`, `fifoReading`, `fifoChunks` and `fifoTotal` are loop thread only (`dispose()` hops there).
    private enum Outcome {
        case contents([UInt8])
        case failed(any Error)
        case fifo(Int32)
    }

    private enum State {
        /// The pool job is queued or running.
        case onPool(Subscriber<[UInt8]>)
        /// The file is a FIFO, read on the loop.
        case readingFIFO(Subscriber<[UInt8]>)
        case ended
    }

    /// Bytes per read system call by default: large enough that a 1 GiB file takes 128 calls, small enough
    /// that a disposal is seen within one of them.
    static let defaultReadSize = 8 << 20

    private let path: String
    private let maxSize: Int
    private let readSize: Int
    /// Test seam: told on the pool thread, after each read system call, how many bytes were read so far.
    private let afterEachRead: (@Sendable (Int) -> Void)?
    private let stopped = Atomic<Bool>(false)
    let disposedFlag = Atomic<Bool>(false)
    private var outcome: Outcome?
    private var state: State
    /// The subscription to the FIFO's chunks (`FIFOStream`) while it is read.
    private var fifoReading: (any Disposable)?
    private var fifoChunks: [[UInt8]] = []
    private var fifoTotal = 0

    init(loop: EventLoop, path: String, maxSize: Int, readSize: Int, subscriber: Subscriber<[UInt8]>,
         afterEachRead: (@Sendable (Int) -> Void)?) {
        self.path = path
        self.maxSize = maxSize
        self.readSize = max(1, readSize)
        self.afterEachRead = afterEachRead
        state = .onPool(subscriber)
        super.init(loop: loop, type: UV_WORK)
    }

    override var label: String { "Files.read \(path)" }

    /// Starts the pool job; the subscriber hears libuv's refusal.
    static func start(_ read: WholeFileRead, for subscriber: Subscriber<[UInt8]>) -> (any Disposable)? {
        guard read.loop.acceptsNewRequests else {
            subscriber.sendError(EventLoopError.shutDown(loop: read.loop.name))
            return nil
        }
        do {
            try read.queueOnPool("read \(read.path)")
        } catch {
            read.state = .ended
            subscriber.sendError(error)
            return nil
        }
        return read
    }

    // MARK: - pool thread

    override func runOnPool() {
        outcome = readOnPool()
    }

    private func readOnPool() -> Outcome {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return .failed(lastError("open \(path)")) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let error = lastError("fstat \(path)")
            closeDescriptor(descriptor)
            return .failed(error)
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFIFO { return .fifo(descriptor) }
        defer { closeDescriptor(descriptor) }
        if type != S_IFREG {
            // A device read with O_NONBLOCK fails with EAGAIN where the caller expects it to wait for data.
            let flags = fcntl(descriptor, F_GETFL)
            if flags >= 0 { _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) }
        }
        do {
            var contents: [UInt8] = []
            if type == S_IFREG && info.st_size > 0 {
                let size = Int(info.st_size)
                guard size <= maxSize else {
                    return .failed(UVError(code: UV_EFBIG.rawValue,
                                           message: "the file has \(size) bytes, more than maxSize (\(maxSize) bytes); read it with Files.chunks",
                                           context: "read \(path)"))
                }
                try checkAllocation(size)
                contents = try [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                    while count < size {
                        let got = try readOnce(descriptor, into: UnsafeMutableRawPointer(buffer.baseAddress! + count),
                                               count: min(size - count, readSize), total: count)
                        if got == 0 { break }  // the file shrank since fstat
                        count += got
                    }
                }
                if contents.count < size { return .contents(contents) }
            }
            try appendRest(of: descriptor, to: &contents)
            return .contents(contents)
        } catch {
            return .failed(error)
        }
    }

    /// Appends what `descriptor` still has (all of it, for a source of unknown size) until EOF or past `maxSize`.
    private func appendRest(of descriptor: Int32, to contents: inout [UInt8]) throws(UVError) {
        let scratchSize = min(readSize, 1 << 20)
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: scratchSize, alignment: 16)
        defer { scratch.deallocate() }
        while true {
            let room = maxSize - contents.count
            // One byte past the room is enough to know the source holds more than maxSize.
            let got = try readOnce(descriptor, into: scratch, count: min(scratchSize - 1, room) + 1, total: contents.count)
            if got == 0 { return }
            if got > room {
                throw UVError(code: UV_EFBIG.rawValue,
                              message: "more than maxSize (\(maxSize) bytes) was read and the source has not ended; read it with Files.chunks",
                              context: "read \(path)")
            }
            if contents.count + got > contents.capacity {
                let capacity = min(max(contents.capacity * 2, contents.count + got, 65_536), maxSize)
                try checkAllocation(capacity)
                contents.reserveCapacity(capacity)
            }
            contents.append(contentsOf: UnsafeRawBufferPointer(start: scratch, count: got))
        }
    }

    /// One `read` system call (EINTR retried); 0 at EOF. Throws `ECANCELED` once the read was disposed.
    private func readOnce(_ descriptor: Int32, into base: UnsafeMutableRawPointer, count: Int, total: Int) throws(UVError) -> Int {
        while true {
            // `dispose()` sets its flag before it hops to the loop: the job stops at its next read.
            if stopped.load(ordering: .relaxed) || disposedFlag.load(ordering: .relaxed) {
                throw UVError(code: UVError.cancelledCode, message: "the read was disposed", context: "read \(path)")
            }
            let got = read(descriptor, base, count)
            if got >= 0 {
                afterEachRead?(total + got)
                return got
            }
            if errno != EINTR { throw lastError("read \(path)") }
        }
    }

    /// Refuses with `ENOMEM` an allocation the system would not grant (Swift would trap in the array's allocation).
    private func checkAllocation(_ byteCount: Int) throws(UVError) {
        // The array adds a header of a few words to the elements.
        guard let probe = malloc(byteCount + 64) else {
            throw UVError(code: UV_ENOMEM.rawValue, message: "cannot allocate \(byteCount) bytes for the contents", context: "read \(path)")
        }
        free(probe)
    }

    private func lastError(_ context: String) -> UVError {
        UVError(code: -errno, context: context)
    }

    // MARK: - loop thread

    override func complete(status: Int32) {
        let outcome = self.outcome
        self.outcome = nil
        guard case .onPool(let subscriber) = state else {
            // Disposed or shut down meanwhile: only a FIFO's descriptor is still open.
            if case .fifo(let descriptor)? = outcome { closeDescriptor(descriptor) }
            return
        }
        state = .ended
        let result: Result<[UInt8], any Error>?
        switch outcome {
        case .fifo(let descriptor)?:
            guard status < 0 else {
                readFIFO(descriptor, for: subscriber)
                return
            }
            closeDescriptor(descriptor)
            result = nil
        case .contents(let contents)?: result = .success(contents)
        case .failed(let error)?: result = .failure(error)
        case nil: result = nil
        }
        deliver(result, status: status, to: subscriber, context: "read \(path)", notRun: "the read did not run")
    }

    /// Reads the FIFO through the stream core into this loop (we are on its thread, so it is the
    /// subscription's home and chunks arrive without a hop), counting them against `maxSize`.
    private func readFIFO(_ descriptor: Int32, for subscriber: Subscriber<[UInt8]>) {
        let path = self.path, loop = self.loop
        state = .readingFIFO(subscriber)
        let reading = Signal<[UInt8]> { reader in
            FIFOStream.read(descriptor: descriptor, path: path, chunkLimit: ReadBuffer.size, what: "Files.read", on: loop, into: reader)
        }.subscribe(next: { [self] chunk in fifoDidRead(chunk) },
                    error: { [self] error in fifoDidEnd(error) },
                    completed: { [self] in fifoDidEnd(nil) })
        if case .readingFIFO = state {
            fifoReading = reading
        } else {
            reading.dispose()  // it ended while starting (the stream could not open, the loop shut down)
        }
    }

    private func fifoDidRead(_ chunk: [UInt8]) {
        guard case .readingFIFO(let subscriber) = state else { return }
        fifoTotal += chunk.count
        if fifoTotal > maxSize {
            state = .ended
            fifoChunks = []
            fifoReading?.dispose()
            fifoReading = nil
            subscriber.sendError(UVError(code: UV_EFBIG.rawValue,
                                         message: "more than maxSize (\(maxSize) bytes) came through the FIFO before its writers closed it; read it with Files.chunks",
                                         context: "read \(path)"))
            return
        }
        fifoChunks.append(chunk)
    }

    private func fifoDidEnd(_ error: (any Error)?) {
        guard case .readingFIFO(let subscriber) = state else { return }
        state = .ended
        fifoReading = nil
        let chunks = fifoChunks
        fifoChunks = []
        if let error {
            subscriber.sendError(error)
            return
        }
        // The one copy of a FIFO's bytes on the loop thread, at its end.
        var contents: [UInt8] = []
        contents.reserveCapacity(fifoTotal)
        for chunk in chunks { contents.append(contentsOf: chunk) }
        subscriber.sendNext(contents)
        subscriber.sendCompleted()
    }

    override func cancelForShutdown() {
        stopped.store(true, ordering: .relaxed)
        guard case .onPool(let subscriber) = state else { return }
        state = .ended
        cancel()
        subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
    }

    /// Stops: a queued job is cancelled, a running one stops at its next read; a FIFO reader is closed.
    func abandon() {
        switch state {
        case .onPool:
            state = .ended
            cancel()
        case .readingFIFO:
            state = .ended
            fifoChunks = []
            fifoReading?.dispose()
            fifoReading = nil
        case .ended:
            break
        }
    }
}

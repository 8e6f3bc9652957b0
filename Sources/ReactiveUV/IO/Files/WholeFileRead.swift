internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `Files.read`: the whole file, read in one pool job straight into the array delivered (no regrowth copies).
///
/// A regular file larger than `maxSize` is refused (`EFBIG`) before any read, else read into an array of its
/// size and on in case it grew; a source of unknown size is appended to until EOF or past `maxSize`; a FIFO's
/// descriptor goes back to the loop, which reads it as a stream (`FIFOStream`) and joins the chunks at EOF.
final class WholeFileRead: @unchecked Sendable {
    // The settings are immutable (the job reads them on the pool); the FIFO's chunks are loop thread only.
    private enum Outcome {
        case contents([UInt8])
        case fifo(Int32)
    }

    /// Bytes per read system call by default; a stop is seen between two.
    static let defaultReadSize = 8 << 20

    private let operation: FileOperation<[UInt8]>
    private let path: String
    private let maxSize: Int
    private let readSize: Int
    /// Test seam: told on the pool thread, after each read system call, how many bytes were read so far.
    private let afterEachRead: (@Sendable (Int) -> Void)?
    private var fifoChunks: [[UInt8]] = []
    private var fifoTotal = 0

    init(operation: FileOperation<[UInt8]>, path: String, maxSize: Int, readSize: Int, afterEachRead: (@Sendable (Int) -> Void)?) {
        self.operation = operation
        self.path = path
        self.maxSize = maxSize
        self.readSize = max(1, readSize)
        self.afterEachRead = afterEachRead
    }

    func start() {
        operation.job("read \(path)", { [self] stop in try readOnPool(stop) }, discard: { outcome in
            if case .fifo(let descriptor) = outcome { closeDescriptor(descriptor) }
        }) { [self] outcome in
            switch outcome {
            case .contents(let contents):
                operation.send(contents)
                operation.finish()
            case .fifo(let descriptor):
                readFIFO(descriptor)
            }
        }
    }

    // MARK: - pool thread

    private func readOnPool(_ stop: JobStopFlag) throws -> Outcome {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw systemCallError("open \(path)") }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let error = systemCallError("fstat \(path)")
            closeDescriptor(descriptor)
            throw error
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFIFO { return .fifo(descriptor) }
        defer { closeDescriptor(descriptor) }
        // A device read with O_NONBLOCK fails with EAGAIN where the caller expects it to wait for data.
        if type != S_IFREG { Files.setBlocking(descriptor) }
        var contents: [UInt8] = []
        if type == S_IFREG && info.st_size > 0 {
            let size = Int(info.st_size)
            guard size <= maxSize else {
                throw UVError(code: UV_EFBIG.rawValue, message: "the file has \(size) bytes, more than maxSize (\(maxSize) bytes); read it with Files.chunks",
                              context: "read \(path)")
            }
            try checkAllocation(size)
            contents = try [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                while count < size {
                    let got = try readOnce(descriptor, into: buffer.baseAddress! + count, count: min(size - count, readSize), total: count, stop)
                    if got == 0 { break }  // the file shrank since fstat
                    count += got
                }
            }
            if contents.count < size { return .contents(contents) }
        }
        try appendRest(of: descriptor, to: &contents, stop)
        return .contents(contents)
    }

    /// Appends what `descriptor` still has (all of it, for a source of unknown size) until EOF or past `maxSize`.
    private func appendRest(of descriptor: Int32, to contents: inout [UInt8], _ stop: JobStopFlag) throws(UVError) {
        let scratchSize = min(readSize, 1 << 20)
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: scratchSize, alignment: 16)
        defer { scratch.deallocate() }
        while true {
            let room = maxSize - contents.count
            // One byte past the room is enough to know the source holds more than maxSize.
            let got = try readOnce(descriptor, into: scratch, count: min(scratchSize - 1, room) + 1, total: contents.count, stop)
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

    /// One `read` system call (EINTR retried); 0 at EOF. Throws `ECANCELED` once the operation stopped.
    private func readOnce(_ descriptor: Int32, into base: UnsafeMutableRawPointer, count: Int, total: Int, _ stop: JobStopFlag) throws(UVError) -> Int {
        while true {
            if stop.isSet { throw UVError(code: UVError.cancelledCode, message: "the read was disposed", context: "read \(path)") }
            let got = read(descriptor, base, count)
            if got >= 0 {
                afterEachRead?(total + got)
                return got
            }
            if errno != EINTR { throw systemCallError("read \(path)") }
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

    // MARK: - loop thread

    /// Reads the FIFO through the stream core on this loop, counting the chunks against `maxSize`.
    private func readFIFO(_ descriptor: Int32) {
        let (path, loop) = (self.path, operation.loop)
        let reading = Signal<[UInt8]> { reader in
            FIFOStream.read(descriptor: descriptor, path: path, chunkLimit: ReadBuffer.size, what: "Files.read", on: loop, into: reader)
        }.subscribe(next: { [self] chunk in
            fifoTotal += chunk.count
            guard fifoTotal <= maxSize else {
                fifoChunks = []
                return operation.finish(UVError(code: UV_EFBIG.rawValue, message: "more than maxSize (\(maxSize) bytes) came through the FIFO before its writers closed it; read it with Files.chunks",
                                                context: "read \(path)"))
            }
            fifoChunks.append(chunk)
        }, error: { [self] in operation.finish($0) }, completed: { [self] in
            var contents: [UInt8] = []
            contents.reserveCapacity(fifoTotal)
            for chunk in fifoChunks { contents.append(contentsOf: chunk) }
            fifoChunks = []
            operation.send(contents)
            operation.finish()
        })
        operation.onEnd { reading.dispose() }
    }
}

/// A `UVError` for a failed system call: `errno` as libuv's negative code.
func systemCallError(_ context: String) -> UVError {
    UVError(code: -errno, context: context)
}

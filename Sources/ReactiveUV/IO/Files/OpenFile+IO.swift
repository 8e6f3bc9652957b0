internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension OpenFile {
    /// The largest `count` of `read(at:count:)` and `chunkSize` of `chunks(from:chunkSize:)`: 1 GiB
    /// (`Files.maxChunkSize`). Thread rule: safe from any thread.
    public static let maxReadCount = Files.maxChunkSize

    /// Reads up to `count` bytes (0...`maxReadCount`) at `offset` (0 or more) and sends them, then completes: fewer
    /// only at the end of the file, none past it. A bad offset or count fails with `EINVAL`.
    /// Thread rule: safe from any thread.
    public func read(at offset: Int, count: Int) -> Signal<[UInt8]> {
        let path = self.path
        if let error = checkRange(offset: offset, count: count, limit: Self.maxReadCount, "read") { return .error(error) }
        return operation("read", simulated: { files, descriptor throws(UVError) in
            try files.read(descriptor, at: offset, count: count, context: "read \(path)")
        }) { descriptor, _ in
            try OpenFile.readBytes(descriptor, at: offset, count: count, context: "read \(path)")
        }
    }

    /// Reads from `offset` (0 or more) to the end of the file in chunks of at most `chunkSize` bytes
    /// (1...`maxReadCount`; others fail with `EINVAL`), then completes. Up to 3 reads are in flight on the pool; chunks
    /// arrive in order, and a paused consumer holds new reads. A growing file is read until a read finds nothing; a
    /// source without an end up to offset `Int.max`. Thread rule: safe from any thread.
    public func chunks(from offset: Int = 0, chunkSize: Int = 65_536) -> Signal<[UInt8]> {
        if let error = checkRange(offset: offset, count: chunkSize, limit: Self.maxReadCount, "chunks", countMinimum: 1) { return .error(error) }
        return onLoop("chunks", closedAs: "read") { [self] subscriber in
            ChunkedFileRead(file: self, offset: offset, chunkSize: chunkSize, subscriber: subscriber).start()
        }
    }

    /// Writes all of `bytes` at `offset` (0 or more, else `EINVAL`), then sends the count written and completes. The
    /// bytes go out in requests of at most 1 GiB; disposing stops between two. Past the end the file grows (the gap
    /// reads as zeros); with the `append` option the bytes go at the end. Thread rule: safe from any thread.
    public func write(_ bytes: [UInt8], at offset: Int) -> Signal<Int> {
        write(bytes, at: offset, largestRequest: Files.largestWriteRequest)
    }

    /// `write(_:at:)` with the largest request (tests make it small).
    func write(_ bytes: [UInt8], at offset: Int, largestRequest: Int) -> Signal<Int> {
        let path = self.path
        if let error = checkRange(offset: offset, count: bytes.count, limit: Int.max, "write") { return .error(error) }
        return operation("write", simulated: { files, descriptor throws(UVError) in
            try files.write(bytes, to: descriptor, at: offset, context: "write \(path)")
        }) { descriptor, stop in
            try OpenFile.writeAll(.array(bytes), to: descriptor, at: offset, largestRequest: largestRequest, stop: stop, context: "write \(path)")
        }
    }

    /// Writes all of `bytes` at the end of the file as it is when the append starts, then sends the count written
    /// and completes. Appends through this `OpenFile` run one after another; for appends the kernel places against
    /// other writers, open with the `append` option. Thread rule: safe from any thread.
    public func append(_ bytes: [UInt8]) -> Signal<Int> {
        let path = self.path
        return onLoop("append") { [self] subscriber in
            let append = QueuedAppend(file: self, subscriber: subscriber, simulated: { files, descriptor throws(UVError) in
                try files.write(bytes, to: descriptor, at: nil, context: "append \(path)")
            }) { descriptor, stop in
                var status = Glibc.stat()
                guard fstat(descriptor, &status) == 0 else { throw systemCallError("append \(path)") }
                return try OpenFile.writeAll(.array(bytes), to: descriptor, at: Int(status.st_size),
                                             largestRequest: Files.largestWriteRequest, stop: stop, context: "append \(path)")
            }
            enqueueAppend(append.start)
            return append
        }
    }

    /// Sends what `fstat` says about the file, then completes. Thread rule: safe from any thread.
    public func stat() -> Signal<FileInfo> {
        let path = self.path
        return operation("fstat", simulated: { files, descriptor throws(UVError) in
            try files.stat(descriptor, context: "fstat \(path)")
        }) { descriptor, _ in
            try Files.callNow("fstat \(path)", { uv_fs_fstat(nil, $0, descriptor, nil) }) { _, fs in FileInfo(statOf: fs) }
        }
    }

    /// Sends the file's size in bytes (`fstat`), then completes. Thread rule: safe from any thread.
    public func size() -> Signal<UInt64> {
        stat().map(\.size)
    }

    /// Flushes the file's data and metadata to the device (`fsync`), then completes. Thread rule: safe from any thread.
    public func sync() -> Signal<Void> {
        flush("fsync") { fsync($0) }
    }

    /// Flushes the file's data and the metadata needed to read it back (`fdatasync`), then completes.
    /// Thread rule: safe from any thread.
    public func dataSync() -> Signal<Void> {
        flush("fdatasync") { fdatasync($0) }
    }

    /// `sync` or `dataSync`: `call` with the descriptor on the pool.
    private func flush(_ name: String, _ call: @escaping @Sendable (Int32) -> Int32) -> Signal<Void> {
        let path = self.path
        return operation(name, simulated: { files, descriptor throws(UVError) in
            try files.sync(descriptor, context: "\(name) \(path)")
        }) { descriptor, _ in
            guard call(descriptor) == 0 else { throw systemCallError("\(name) \(path)") }
        }.ignoreValues()
    }

    /// Cuts the file to `size` bytes, or extends it with zeros (`ftruncate`), then completes; a negative size fails
    /// with `EINVAL`. Thread rule: safe from any thread.
    public func truncate(to size: Int) -> Signal<Void> {
        let path = self.path
        guard size >= 0 else {
            return .error(UVError(code: UVError.invalidArgumentCode, message: "the size must be 0 or more, not \(size)", context: "ftruncate \(path)"))
        }
        return operation("ftruncate", simulated: { files, descriptor throws(UVError) in
            try files.truncate(descriptor, to: size, context: "ftruncate \(path)")
        }) { descriptor, _ in
            guard ftruncate(descriptor, off_t(size)) == 0 else {
                // The kernel's EINVAL for a descriptor open for reading only reads as a bad size.
                let code = errno
                throw OpenFile.accessModeError(descriptor, "truncate", context: "ftruncate \(path)") ?? UVError(code: -code, context: "ftruncate \(path)")
            }
        }.ignoreValues()
    }

    /// Closes the file, then completes, or fails with the close's error (`EIO`), once the operations running on
    /// the pool end (queued ones fail with `EBADF`); the `Files.open` signal completes. A file already closed
    /// fails with `EBADF` saying how. Thread rule: safe from any thread.
    public func close() -> Signal<Void> {
        onLoop("close") { [self] subscriber in
            if let error = closedError("close") {
                subscriber.sendError(error)
                return nil
            }
            requestClose(by: .close) { error in
                subscriber.sendEnd(failure: error)
            }
            return nil
        }
    }

    // MARK: - helpers

    /// A signal that runs `work` with the descriptor on the pool (`simulated` on a simulated loop) and sends its value.
    func operation<Value: Sendable>(_ name: String, simulated: SimulatedFileWork<Value>? = nil,
                                    _ work: @escaping @Sendable (Int32, JobStopFlag) throws -> Value) -> Signal<Value> {
        onLoop(name) { [self] subscriber in
            run(name, work, simulated: simulated) { result in subscriber.sendOnce(result) }
        }
    }

    /// A signal whose subscriber `start` gets on the loop thread; a closed file fails it with `EBADF` first.
    private func onLoop<Value>(_ name: String, closedAs: String? = nil,
                               _ start: @escaping @Sendable (Subscriber<Value>) -> (any Disposable)?) -> Signal<Value> {
        Signal { [self] subscriber in
            if let error = closedError(closedAs ?? name) {
                subscriber.sendError(error)
                return nil
            }
            return LoopBinding.open(on: loop, for: subscriber, what: "OpenFile.\(name)") { _ in start(subscriber) }
        }.debugNamed("+OpenFile.\(name)(\(path))")
    }

    /// `EINVAL` for a negative offset, a count outside `countMinimum...limit`, or an end past `Int.max`.
    private func checkRange(offset: Int, count: Int, limit: Int, _ operation: String, countMinimum: Int = 0) -> UVError? {
        Files.refusal { () throws(UVError) in
            let context = "\(operation) \(path)"
            try FileSystemArguments.require(offset >= 0, "the offset must be 0 or more, not \(offset)", context: context)
            try FileSystemArguments.require(count >= countMinimum && count <= limit, "the count must be \(countMinimum)...\(limit), not \(count)",
                                            context: context)
            try FileSystemArguments.require(offset <= Int.max - count, "offset \(offset) + count \(count) passes the largest file offset",
                                            context: context)
        }
    }

    /// Reads up to `count` bytes at `offset` into a new array (pool thread); short only at the end of the file.
    static func readBytes(_ descriptor: Int32, at offset: Int, count: Int, context: String) throws -> [UInt8] {
        var capacity = count
        var sizeSaidNothing = false
        if count > 1 << 20 {
            // Do not allocate a large array for a short file: the array keeps its capacity.
            var status = Glibc.stat()
            if fstat(descriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFREG {
                if status.st_size > 0 {
                    capacity = min(count, max(0, Int(status.st_size) - offset))
                } else {
                    // A /proc or /sys file says 0 and holds bytes: read what comes, then keep only that.
                    sizeSaidNothing = true
                }
            }
        }
        guard capacity > 0 else { return [] }
        var failure: UVError?
        let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            var done = 0
            while done < capacity {
                let got = pread(descriptor, buffer.baseAddress! + done, capacity - done, off_t(offset + done))
                if got < 0 {
                    if errno == EINTR { continue }
                    let code = errno
                    failure = (code == EBADF ? accessModeError(descriptor, "read", context: context) : nil) ?? UVError(code: -code, context: context)
                    break
                }
                if got == 0 { break }
                done += got
            }
            initialized = done
        }
        if let failure { throw failure }
        if sizeSaidNothing && bytes.count < capacity { return bytes.withUnsafeBufferPointer { Array($0) } }
        return bytes
    }

    /// `EBADF` naming the open mode when it forbids `what`, else nil: the kernel says only "bad file descriptor".
    static func accessModeError(_ descriptor: Int32, _ what: String, context: String) -> UVError? {
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0 else { return nil }
        let reads = what == "read"
        switch flags & O_ACCMODE {
        case O_WRONLY where reads: return accessModeError(writeOnly: true, what, context: context)
        case O_RDONLY where !reads: return accessModeError(writeOnly: false, what, context: context)
        default: return nil
        }
    }

    /// The `EBADF` of a read on a file opened for writing only (`writeOnly`), or of `what` on one opened for reading only.
    static func accessModeError(writeOnly: Bool, _ what: String, context: String) -> UVError {
        if writeOnly {
            return UVError(code: -EBADF, message: "the file was opened for writing only (mode .write): a read needs .read or .readWrite",
                           context: context)
        }
        return UVError(code: -EBADF, message: "the file was opened for reading only (mode .read): a \(what) needs .write or .readWrite",
                       context: context)
    }

    /// Writes all of `bytes` at `offset` (nil: at the descriptor's position) in calls of at most `largestRequest`.
    static func writeAll(_ bytes: WriteBytes, to descriptor: Int32, at offset: Int?, largestRequest: Int,
                         stop: JobStopFlag, context: String) throws -> Int {
        try bytes.withBytes { all in
            var done = 0
            while done < all.count {
                if stop.isSet {
                    throw UVError(code: UVError.cancelledCode, message: "disposed after \(done) of \(all.count) bytes", context: context)
                }
                let length = min(all.count - done, largestRequest)
                let put = offset.map { pwrite(descriptor, all.baseAddress! + done, length, off_t($0 + done)) }
                    ?? Glibc.write(descriptor, all.baseAddress! + done, length)
                if put < 0 {
                    if errno == EINTR { continue }
                    let code = errno
                    throw (code == EBADF ? accessModeError(descriptor, "write", context: context) : nil) ?? UVError(code: -code, context: context)
                }
                if put == 0 {
                    // Asking again would loop for ever.
                    throw UVError(code: UV_EIO.rawValue, message: "the file accepted none of \(all.count - done) bytes", context: context)
                }
                done += put
            }
            return done
        }
    }
}

extension Subscriber {
    /// Sends a one-value operation's result: the value and completion, or the error.
    func sendOnce(_ result: Result<Value, any Error>) {
        switch result {
        case .success(let value):
            sendNext(value)
            sendCompleted()
        case .failure(let error):
            sendError(error)
        }
    }
}

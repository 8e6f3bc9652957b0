internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One `Files.list`: the directory opened by libuv (`uv_fs_opendir`), its entries read in batches by
/// pool jobs that call `readdir(3)`, the stream closed (`uv_fs_closedir`) once no job can still use it.
///
/// Why pool jobs and not `uv_fs_readdir`: that call copies each name with `strdup` on the pool, and
/// leaves the loop thread to make the `String` and to free the copy. A job makes the entries where it
/// reads them, so the loop only delivers them: the loop's time per entry adds to the kernel's
/// `getdents` (one in four batches waits on it), so what the loop does not do is time saved.
///
/// One batch is read ahead: the next job runs while the batch in hand is delivered. A consumer that
/// pauses gets the rest of the batch in hand; the batch read ahead is held until it resumes, and no
/// further job starts: at most two batches are in memory.
final class DirectoryListing: @unchecked Sendable {
    // Loop thread only, as its operation (the flow control's closures run on the thread that registered them);
    // the stream is used on the pool by the one job running, and closed on the loop only after that job ended.
    private let operation: FileSystemOperation<DirectoryEntry>
    private let path: String
    private let batchSize: Int
    private let afterEachBatch: ((Int) -> Void)?
    private let afterEachRead: ((Int) -> Void)?
    /// The directory stream, once open.
    private var directory: UnsafeMutablePointer<uv_dir_t>?
    /// The jobs reading batches, one at a time; the stream closes once the operation ended and no job is out.
    private lazy var jobs = SequentialFileJobs<[DirectoryEntry]>(loop: operation.loop) { [self] in closeDirectory() }
    private var paused = false
    /// A batch that arrived while paused (empty: the end), delivered on resume.
    private var held: [DirectoryEntry]?

    init(operation: FileSystemOperation<DirectoryEntry>, path: String, batchSize: Int, afterEachBatch: ((Int) -> Void)?,
         afterEachRead: ((Int) -> Void)?) {
        self.operation = operation
        self.path = path
        self.batchSize = batchSize
        self.afterEachBatch = afterEachBatch
        self.afterEachRead = afterEachRead
    }

    func start() {
        // Strong captures: the cycle ends when the subscription's teardown drops the flow control.
        operation.subscriber?.setFlowControl(pause: { [self] in paused = true }, resume: { [self] in
            paused = false
            if let batch = held, operation.isRunning {
                held = nil
                deliver(batch)
            }
        })
        // A paused listing has no request pending, so the loop's shutdown would not reach it through one.
        let owner = operation
        if let token = operation.loop.shutdownObservers.add({ owner.finish(EventLoopError.shutDown(loop: owner.loop.name)) }) {
            operation.onEnd { token.dispose() }
        }
        let uvLoop = operation.loop.uvLoop
        operation.step("opendir \(path)", { uv_fs_opendir(uvLoop, $0, self.path, $1) }, read: { _, fs in
            fs.pointee.ptr.assumingMemoryBound(to: uv_dir_t.self)
        }, discard: { fs in
            DirectoryListing.close(fs.pointee.ptr.assumingMemoryBound(to: uv_dir_t.self))
        }) { [self] directory in
            self.directory = directory
            operation.onEnd { [self] in jobs.operationEnded() }
            read()
        }
    }

    /// Starts the job that reads the next batch. Only one is ever out: it starts from `deliver`, which runs
    /// when the previous one has called back, or on resume with the batch it brought.
    private func read() {
        guard let directory, !jobs.hasJobOut, operation.isRunning else { return }
        guard operation.loop.acceptsNewRequests else {
            operation.finish(EventLoopError.shutDown(loop: operation.loop.name))
            return
        }
        let stream = UncheckedSendable(directory)
        let path = self.path, count = batchSize
        jobs.run("readdir \(path)", work: { _ in
            try DirectoryListing.readBatch(stream.value, count: count, path: path)
        }, failed: { [self] in operation.finish($0) }) { [self] result in
            switch result {
            case .success(let batch):
                afterEachRead?(batch.count)
                if paused {
                    held = batch
                } else {
                    deliver(batch)
                }
            case .failure(let error):
                operation.finish(error)
            }
        }
    }

    /// Reads the next batch ahead, then sends this one (an empty batch is the end).
    private func deliver(_ batch: [DirectoryEntry]) {
        if batch.isEmpty {
            operation.finish()
            return
        }
        read()
        operation.send(contentsOf: batch)
        guard operation.isRunning else { return }
        afterEachBatch?(batch.count)
    }

    private func closeDirectory() {
        guard let directory else { return }
        self.directory = nil
        DirectoryListing.close(directory)
    }

    /// Where `d_name` starts in a `dirent` (a stored field of a C struct: its offset always exists).
    private static let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!

    /// Reads up to `count` entries (not `.` and `..`) with `readdir(3)`; fewer only at the end. Pool thread.
    static func readBatch(_ directory: UnsafeMutablePointer<uv_dir_t>, count: Int, path: String) throws -> [DirectoryEntry] {
        guard let stream = directory.pointee.dir else {
            throw UVError(code: UV_EBADF.rawValue, message: "the directory stream is not open", context: "readdir \(path)")
        }
        var entries: [DirectoryEntry] = []
        entries.reserveCapacity(count)
        while entries.count < count {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw systemCallError("readdir \(path)") }
                break
            }
            let name = (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self)
            if name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0)) { continue }
            entries.append(DirectoryEntry(name: makeName(name), type: FileType(direntType: entry.pointee.d_type)))
        }
        return entries
    }

    /// The `String` of an entry's name (validated as UTF-8, as `String(cString:)` does, a bad byte
    /// repaired to U+FFFD). Copied in with its length known, which `String(cString:)` would measure
    /// again: making names is a large share of the pool's work per entry.
    private static func makeName(_ name: UnsafePointer<CChar>) -> String {
        let length = strlen(name)
        if length == 0 { return "" }
        return String(unsafeUninitializedCapacity: length) { buffer in
            UnsafeMutableRawPointer(buffer.baseAddress!).copyMemory(from: name, byteCount: length)
            return length
        }
    }

    /// Closes a directory stream now, on the loop thread (`closedir` does not block).
    static func close(_ directory: UnsafeMutablePointer<uv_dir_t>) {
        var request = uv_fs_t()
        uvCheckReporting(uv_fs_closedir(nil, &request, directory, nil), "closedir")
        uv_fs_req_cleanup(&request)
    }
}

extension FileType {
    /// The type `readdir(3)` records in `d_type`.
    init(direntType: UInt8) {
        switch Int32(direntType) {
        case Int32(DT_REG): self = .regular
        case Int32(DT_DIR): self = .directory
        case Int32(DT_LNK): self = .symbolicLink
        case Int32(DT_FIFO): self = .fifo
        case Int32(DT_SOCK): self = .socket
        case Int32(DT_CHR): self = .characterDevice
        case Int32(DT_BLK): self = .blockDevice
        default: self = .unknown
        }
    }
}

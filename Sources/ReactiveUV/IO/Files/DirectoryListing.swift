internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One `Files.list`: the directory opened by `uv_fs_opendir`, its entries read in batches by pool jobs that
/// call `readdir(3)` and make the entries there (`uv_fs_readdir` would leave the loop to make each `String`).
///
/// The next batch is read while one is delivered; a paused consumer gets the rest of the batch in hand and the
/// batch read ahead is held until it resumes, so at most two are in memory.
final class DirectoryListing: @unchecked Sendable {
    // Loop thread only, as its operation; the stream is used on the pool by the one job out, closed after it.
    private let operation: FileOperation<DirectoryEntry>
    private let path: String
    private let batchSize: Int
    private let afterEachBatch: ((Int) -> Void)?
    private let afterEachRead: ((Int) -> Void)?
    /// The directory stream, once open.
    private var directory: UnsafeMutablePointer<uv_dir_t>?
    private var paused = false
    /// A batch that arrived while paused (empty: the end), delivered on resume.
    private var held: [DirectoryEntry]?

    init(operation: FileOperation<DirectoryEntry>, path: String, batchSize: Int, afterEachBatch: ((Int) -> Void)?,
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
            if let batch = held.take(), operation.isRunning { deliver(batch) }
        })
        // A paused listing has no step pending, so the loop's shutdown would not reach it through one.
        guard operation.followShutdown() else { return }
        operation.request("opendir \(path)", { uv_fs_opendir($0, $1, path, $2) }, read: { _, fs in
            fs.pointee.ptr.assumingMemoryBound(to: uv_dir_t.self)
        }, discard: { fs in
            DirectoryListing.close(fs.pointee.ptr.assumingMemoryBound(to: uv_dir_t.self))
        }) { [self] directory in
            self.directory = directory
            operation.onEnd { DirectoryListing.close(directory) }
            read()
        }
    }

    /// Starts the job that reads the next batch, once the previous one called back: only one is ever out.
    private func read() {
        guard let directory, !operation.isPending else { return }
        let stream = UncheckedSendable(directory)
        let (path, count) = (self.path, batchSize)
        operation.job("readdir \(path)", { _ in try DirectoryListing.readBatch(stream.value, count: count, path: path) }) { [self] batch in
            afterEachRead?(batch.count)
            if paused { held = batch } else { deliver(batch) }
        }
    }

    /// Reads the next batch ahead, then sends this one (an empty batch is the end).
    private func deliver(_ batch: [DirectoryEntry]) {
        if batch.isEmpty { return operation.finish() }
        read()
        operation.send(contentsOf: batch)
        if operation.isRunning { afterEachBatch?(batch.count) }
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

    /// The `String` of an entry's name (bad UTF-8 repaired to U+FFFD), copied in with its length known.
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
        Files.runNow("closedir") { uv_fs_closedir(nil, $0, directory, nil) }
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

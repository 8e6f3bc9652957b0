import Synchronization

/// One `StreamConnection.sendFile` over a TLS connection: the kernel cannot seal records, so the
/// file goes through user space. Chunks are read on the pool as `OpenFile.read` reads
/// (`OpenFile.readBytes`), then sealed and queued on the loop (`sealAndQueue`).
///
/// Bounded by the stream's flow control: one read at a time, started only while the write queue
/// is at or below its low-water mark; so the transfer holds one chunk being read beside what the
/// queue held then. The count it sends is the bytes whose records the kernel took.
final class SealedFileSend: FileTransfer {
    // Loop thread only: made there, driven by its stream's `FileSends`; its reads and writes call back there.
    private enum Phase {
        /// No read on the pool: the next starts once the queue is low enough (or the last write flushed).
        case idle
        case reading
        case ended
    }

    /// One read's bytes (pool thread → loop thread).
    private struct Chunk: Sendable {
        let bytes: [UInt8]
        /// The bytes still to send before this read.
        let wanted: Int
    }

    /// The largest read: four records' worth of plaintext.
    static let chunkSize = 64 << 10

    /// Test seam: chunk reads started by every sealed transfer in the process.
    static let readsStarted = Atomic<Int>(0)

    let context: String
    var onEnd: (() -> Void)?
    private let stream: StreamConnection
    private let file: OpenFile
    private let outcome: FileSendOutcome
    private var offset: Int
    /// Bytes still to read; nil until the first read found the file's size.
    private var remaining: Int?
    /// The file ended, or `count` bytes were read: nothing more to read.
    private var readAll = false
    /// Sealed chunks queued and not flushed yet.
    private var unflushedChunks = 0
    private var sent = 0
    private var phase = Phase.idle
    private var job: FileOperation<Chunk>?

    init(stream: StreamConnection, file: OpenFile, offset: Int, count: Int?, context: String, outcome: FileSendOutcome) {
        self.stream = stream
        self.file = file
        self.offset = offset
        self.remaining = count
        self.context = context
        self.outcome = outcome
    }

    /// Starts at once: earlier sends were sealed into the queue before this, so their records go first.
    func start() {
        pump()
    }

    func queueMayHaveDrained() {
        pump()
    }

    /// Reads the next chunk when the queue has room for it; ends once every chunk read has flushed.
    private func pump() {
        guard phase == .idle else { return }
        if readAll {
            if unflushedChunks == 0 { end(.success(sent)) }
            return
        }
        // Above the low-water mark the next write callback (or this transfer's own) comes back here.
        guard stream.queuedWriteCost <= stream.limits.lowWaterMark else { return }
        readNext()
    }

    private func readNext() {
        phase = .reading
        Self.readsStarted.add(1, ordering: .relaxed)
        let (offset, remaining, context) = (self.offset, self.remaining, self.context)
        let made = file.run("read", { descriptor, _ in
            let wanted = try remaining ?? FileSendOperation.bytesToEnd(of: descriptor, from: offset, context: context)
            guard wanted > 0 else { return Chunk(bytes: [], wanted: 0) }
            let bytes = try OpenFile.readBytes(descriptor, at: offset, count: min(wanted, SealedFileSend.chunkSize), context: context)
            return Chunk(bytes: bytes, wanted: wanted)
        }) { [self] result in
            job = nil
            guard phase == .reading else { return }
            switch result {
            case .success(let chunk): seal(chunk)
            case .failure(let error): fail(error)
            }
        }
        // A closed file answered at once (and the transfer ended): nothing runs.
        if phase == .reading { job = made }
    }

    private func seal(_ chunk: Chunk) {
        let count = chunk.bytes.count
        offset += count
        remaining = chunk.wanted - count
        // A read short of the chunk asked for met the end of the file: the transfer ends with what there was.
        readAll = remaining == 0 || count < min(chunk.wanted, Self.chunkSize)
        phase = .idle
        if count > 0 {
            guard stream.isHandleOpen else { return fail(stream.closedError("sendfile")) }
            unflushedChunks += 1
            stream.sealAndQueue(chunk.bytes) { [self] error in
                unflushedChunks -= 1
                guard phase != .ended else { return }
                if let error { return fail(error) }
                sent += count
                pump()
            }
        }
        pump()
    }

    func streamEnded(_ reason: StreamConnection.EndReason) {
        guard phase != .ended else { return }
        fail(FileSendOperation.stopError(reason, sent: sent, loop: stream.loop, context: context))
    }

    func fail(_ error: any Error) {
        end(.failure(error))
    }

    private func end(_ result: Result<Int, any Error>) {
        guard phase != .ended else { return }
        phase = .ended
        job.take()?.abandon()
        outcome.finish(result)
        let onEnd = self.onEnd
        self.onEnd = nil
        onEnd?()
    }
}

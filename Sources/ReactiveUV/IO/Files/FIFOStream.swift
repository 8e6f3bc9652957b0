import Synchronization

/// Reads a FIFO (named pipe) on the loop through the stream core, for `Files.read` and `Files.chunks`.
///
/// Read on the pool, a FIFO would hold a pool thread until a writer comes (four such reads stall every file
/// request, DNS lookup and `ThreadPool.run`). Opened with `O_NONBLOCK`, its descriptor goes to a
/// `StreamConnection` (`.fifo`, a `uv_pipe_t`): epoll waits for data, and pausing, EOF (the last writer
/// closing), errors, shutdown and closing are the stream core's. Thread rule: loop thread only.
enum FIFOStream {
    /// Takes over `descriptor` (a FIFO's read end, closed exactly once) and reads it into `reader` in chunks of at
    /// most `chunkLimit` bytes; `path` and `what` ("Files.chunks") name it in messages. A failure goes to `reader`.
    ///
    /// - Returns: What stops the reading and closes the FIFO, or nil when `reader` was already answered.
    static func read(descriptor: Int32, path: String, chunkLimit: Int, what: String, on loop: EventLoop,
                     into reader: Subscriber<[UInt8]>) -> (any Disposable)? {
        guard loop.acceptsNewHandles else {
            closeDescriptor(descriptor)
            reader.sendError(EventLoopError.shutDown(loop: loop.name))
            return nil
        }
        let stream = StreamConnection(loop: loop, transport: .fifo, limits: StreamBufferLimits(),
                                  origin: "read by \(what)", readChunkLimit: chunkLimit)
        stream.peerDescription = path
        do {
            try stream.open(descriptor: descriptor)
        } catch {
            closeDescriptor(descriptor)  // the handle never took it
            reader.sendError(error)
            return nil
        }
        let owner = FIFOReading(stream: stream)
        stream.owner = owner
        guard let reading = stream.startReading(reader) else {
            stream.end(.closed)
            return nil
        }
        owner.reading = reading
        return owner
    }
}

/// One FIFO being read: owns its stream (which only holds it weakly) and ends it at EOF or on disposal.
final class FIFOReading: LoopDisposable, StreamConnectionOwner, @unchecked Sendable {
    // `reading` is set on the loop thread before this is handed out, then used only there; `disposedFlag` is atomic.
    private let stream: StreamConnection
    /// The reader's subscription to the stream (its token).
    fileprivate var reading: (any Disposable)?
    let disposedFlag = Atomic<Bool>(false)

    fileprivate init(stream: StreamConnection) {
        self.stream = stream
    }

    var loop: EventLoop { stream.loop }

    /// A socket stays half-open at EOF; a FIFO has nothing left to do: closing the handle closes the descriptor.
    func streamDidReadEndOfFile(_ stream: StreamConnection) {
        stream.end(.closed)
    }

    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {}

    /// Stops reading (the reader hears nothing more) and closes the handle, and with it the descriptor. Idempotent.
    func abandon() {
        reading?.dispose()
        reading = nil
        stream.end(.closed)
    }
}

import Synchronization

/// Reads a FIFO (named pipe) on the loop through the stream core, for `Files.read` and `Files.chunks`.
///
/// A FIFO read on the thread pool blocks a pool thread until a writer comes
/// (in `open`, then in every `read`), and with four such reads every file
/// request, DNS lookup and `ThreadPool.run` in the process waits. So the file
/// is opened with `O_NONBLOCK` (which never waits for a writer) and, once
/// `fstat` says it is a FIFO, its descriptor is handed to a `StreamConnection`
/// (transport `.fifo`: a `uv_pipe_t` opened with `uv_pipe_open`): libuv waits
/// for data with epoll on the loop, and no pool thread is involved. Reading,
/// pausing for a consumer that cannot keep up, EOF, read errors, the loop's
/// shutdown and closing are the stream core's, as for every other stream.
/// Linux reports neither data nor hang-up on a FIFO until a writer has come,
/// so a reader that opened first waits for the writer; the end is the last
/// writer closing (EOF), which completes the reader and closes the handle.
///
/// Thread rule: loop thread only.
enum FIFOStream {
    /// Takes over `descriptor` (a FIFO's read end) and reads it into `reader` in chunks of at most `chunkLimit` bytes.
    ///
    /// The descriptor is closed exactly once: with the handle (libuv closes it), or here when no
    /// handle could take it. A failure to open or start is sent to `reader`.
    ///
    /// - Parameters:
    ///   - path: The FIFO's path, for messages and leak reports.
    ///   - what: Who reads it ("Files.chunks"), for leak reports.
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
    // `stream` is immutable; `reading` is set once on the loop thread before this is handed out,
    // then only read there (`abandon` runs there); `disposedFlag` is atomic.
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

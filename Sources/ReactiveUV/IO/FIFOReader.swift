internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads a FIFO (named pipe) through a `uv_pipe_t`, for `Files.read` and `Files.chunks`.
///
/// A FIFO read on the thread pool blocks a pool thread until a writer comes
/// (in `open`, then in every `read`), and with four such reads every file
/// request, DNS lookup and `ThreadPool.run` in the process waits. So the file
/// is opened with `O_NONBLOCK` (which never waits for a writer) and, once
/// `fstat` says it is a FIFO, its descriptor is handed to this handle: libuv
/// waits for data with epoll on the loop, and no pool thread is involved.
/// Linux reports neither data nor hang-up on a FIFO until a writer has come,
/// so a reader that opened first waits for the writer; the end is the last
/// writer closing (EOF).
///
/// Thread rule: loop thread only.
final class FIFOReader: LoopHandle {
    // Loop thread only.
    private let path: String
    /// The largest chunk handed to `onChunk` (at most `ReadBuffer.size`: reads go into the loop's read buffer).
    private let chunkLimit: Int
    private var onChunk: (([UInt8]) -> Void)?
    private var onEnd: (((any Error)?) -> Void)?

    /// A reader of the FIFO at `path` (for messages) that hands out chunks of at most `chunkLimit` bytes.
    init(loop: EventLoop, path: String, chunkLimit: Int) {
        self.path = path
        self.chunkLimit = max(1, min(chunkLimit, ReadBuffer.size))
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE))
    }

    override var label: String { "FIFO \(path) read by Files" }

    /// Takes over `descriptor` (closed with the handle, or here if the handle cannot take it) and starts reading.
    ///
    /// `onChunk` gets every chunk, `onEnd` the end once: nil at EOF, else the error.
    func start(descriptor: Int32, onChunk: @escaping ([UInt8]) -> Void, onEnd: @escaping ((any Error)?) -> Void) throws(UVError) {
        do {
            try uvCheck(uv_pipe_init(loop.uvLoop, pointer(as: uv_pipe_t.self), 0), "uv_pipe_init for \(path)")
        } catch {
            closeDescriptor(descriptor)
            throw error
        }
        didOpen()
        do {
            try uvCheck(uv_pipe_open(pointer(as: uv_pipe_t.self), descriptor), "uv_pipe_open \(path)")
        } catch {
            close()
            closeDescriptor(descriptor)
            throw error
        }
        do {
            try uvCheck(uv_read_start(pointer(as: uv_stream_t.self), fifoReadAllocate, fifoReadCallback), "uv_read_start \(path)")
        } catch {
            close()  // the pipe owns the descriptor now: closing the handle closes it
            throw error
        }
        self.onChunk = onChunk
        self.onEnd = onEnd
    }

    /// Stops reading without telling anyone (the owner was disposed). Idempotent.
    func stop() {
        onChunk = nil
        onEnd = nil
        close()
    }

    override func closeForShutdown() {
        end(EventLoopError.shutDown(loop: loop.name))
    }

    override func didClose() {
        onChunk = nil
        onEnd = nil
    }

    private func end(_ error: (any Error)?) {
        let onEnd = self.onEnd
        onChunk = nil
        self.onEnd = nil
        close()
        onEnd?(error)
    }

    fileprivate func allocate(_ buffer: UnsafeMutablePointer<uv_buf_t>) {
        buffer.pointee = uv_buf_t(base: loop.readBuffer.assumingMemoryBound(to: CChar.self), len: chunkLimit)
    }

    fileprivate func didRead(_ count: Int, _ buffer: UnsafePointer<uv_buf_t>?) {
        if count > 0 {
            onChunk?(ReadBuffer.copy(buffer?.pointee.base, count: count))
        } else if count == endOfFileCode {
            end(nil)
        } else if count < 0 {
            end(UVError(code: Int32(truncatingIfNeeded: count), context: "read \(path)"))
        }
    }
}

/// The allocation callback of a FIFO reader: the loop's read buffer, cut to the reader's chunk limit.
private let fifoReadAllocate: uv_alloc_cb = { handle, _, buffer in
    guard let data = handle?.pointee.data, let buffer else { return }
    Unmanaged<FIFOReader>.fromOpaque(data).takeUnretainedValue().allocate(buffer)
}

private let fifoReadCallback: uv_read_cb = { stream, count, buffer in
    guard let data = stream?.pointee.data else { return }
    Unmanaged<FIFOReader>.fromOpaque(data).takeUnretainedValue().didRead(count, buffer)
}

/// Closes a descriptor ReactiveUV owns; EINTR is not retried (Linux closes the descriptor anyway).
func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

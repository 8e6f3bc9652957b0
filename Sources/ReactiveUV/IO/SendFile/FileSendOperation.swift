internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One `StreamConnection.sendFile`: `sendfile(2)` calls on the pool against a duplicate of the
/// socket's descriptor, with a writable-poll on the loop between them when the socket is full.
///
/// A plain stream's `FileTransfer` (a TLS stream's is `SealedFileSend`). A duplicate, because the
/// stream closes its own descriptor (whose number may be reused) when the connection ends.
final class FileSendOperation: FileTransfer, @unchecked Sendable {
    // Sendable: loop thread only (created there; its stream's `FileSends` and the poll's callbacks
    // run there).
    private enum Phase {
        case queued
        /// Earlier writes are still in libuv's queue: the file follows them.
        case waitingForQueue
        case sending
        case waitingWritable
        case ended
    }

    /// One `sendfile` call's result (pool thread → loop thread).
    private struct Step: Sendable {
        let sent: Int
        /// The bytes still to send before this call.
        let wanted: Int
        /// The socket took less than offered (full): wait for writability.
        let blocked: Bool
    }

    /// Test seam: `sendfile` calls started by every transfer in the process.
    static let callsStarted = Atomic<Int>(0)

    let context: String
    private let stream: StreamConnection
    private let file: OpenFile
    private let outcome: FileSendOutcome
    private var offset: Int
    /// Bytes still to send; nil until the first call read the file's size.
    private var remaining: Int?
    private var sent = 0
    private var phase = Phase.queued
    private var duplicate: Int32 = -1
    private var job: FileOperation<Step>?
    private var poll: (any Disposable)?
    private var pollFailure: (any Error)?
    /// Told once when the transfer ended (its stream's `FileSends` releases what waited behind it).
    var onEnd: (() -> Void)?

    init(stream: StreamConnection, file: OpenFile, offset: Int, count: Int?, context: String, outcome: FileSendOutcome) {
        self.stream = stream
        self.file = file
        self.offset = offset
        self.remaining = count
        self.context = context
        self.outcome = outcome
    }

    /// Starts once libuv's queue of earlier writes is empty (their bytes are in the kernel, in order).
    func start() {
        guard let descriptor = stream.io.descriptor else {
            fail(UVError(code: UV_EBADF.rawValue, message: "the connection has no descriptor", context: context))
            return
        }
        duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else {
            fail(systemCallError(context))
            return
        }
        phase = .waitingForQueue
        queueMayHaveDrained()
    }

    /// A write finished (or the transfer just began): go once nothing is left in libuv's queue.
    func queueMayHaveDrained() {
        guard phase == .waitingForQueue, stream.loopQueuedWriteByteCount == 0 else { return }
        sendNext()
    }

    private func sendNext() {
        phase = .sending
        Self.callsStarted.add(1, ordering: .relaxed)
        let (socket, offset, remaining) = (duplicate, self.offset, self.remaining)
        let context = self.context
        job = file.run("sendfile", { descriptor, _ in
            let wanted = try remaining ?? FileSendOperation.bytesToEnd(of: descriptor, from: offset, context: context)
            let offer = min(wanted, Files.largestWriteRequest)
            guard offer > 0 else { return Step(sent: 0, wanted: wanted, blocked: false) }
            var position = off_t(offset)
            while true {
                let result = Glibc.sendfile(socket, descriptor, &position, offer)
                if result >= 0 { return Step(sent: result, wanted: wanted, blocked: result > 0 && result < offer) }
                switch errno {
                case EINTR: continue
                case EAGAIN: return Step(sent: 0, wanted: wanted, blocked: true)
                // The socket is fine (its errors are others): the file is one sendfile cannot read.
                case EBADF where fcntl(descriptor, F_GETFL) & O_ACCMODE == O_WRONLY:
                    throw UVError(code: UV_EBADF.rawValue,
                                  message: "the file was opened for writing only (mode .write), and sendFile reads it: open it with .read or .readWrite",
                                  context: context)
                case EINVAL where position == off_t(offset):
                    throw FileSendOperation.notSendable("sendfile(2) cannot read this file (a /proc or /sys file, or a file system without it)", context)
                default: throw systemCallError(context)
                }
            }
        }) { [self] result in
            job = nil
            guard phase == .sending else { return }
            switch result {
            case .success(let step):
                advance(step)
            case .failure(let error as UVError) where FileSendOperation.socketErrors.contains(error.code):
                // The peer went away: the connection ends with the error, which ends this transfer.
                stream.end(.failed(error))
                if phase != .ended { fail(error) }
            case .failure(let error):
                fail(error)
            }
        }
        if let job {
            // The duplicate closes only after the last call that uses it.
            job.onEnd { [self] in if phase == .ended { closeDuplicate() } }
        }
    }

    /// The bytes from `offset` to the end of the file (pool thread): a transfer without a count
    /// sends the file as its size says when the transfer starts.
    static func bytesToEnd(of descriptor: Int32, from offset: Int, context: String) throws -> Int {
        var status = Glibc.stat()
        guard fstat(descriptor, &status) == 0 else { throw systemCallError(context) }
        // A /proc or /sys file says 0 and holds bytes: one byte read tells it from an empty file.
        var byte: UInt8 = 0
        if status.st_size == 0, pread(descriptor, &byte, 1, off_t(offset)) == 1 {
            throw FileSendOperation.notSendable("the file says its size is 0 but holds bytes (a /proc or /sys file)", context)
        }
        return max(0, Int(status.st_size) - offset)
    }

    /// `EINVAL` for a file `sendfile` cannot send as asked, saying what to do instead.
    private static func notSendable(_ why: String, _ context: String) -> UVError {
        UVError(code: UVError.invalidArgumentCode,
                message: "\(why): read it (Files.read, OpenFile.read) and send the bytes",
                context: context)
    }

    private static let socketErrors: Set<Int32> = [UV_EPIPE.rawValue, UV_ECONNRESET.rawValue, UV_ENOTCONN.rawValue,
                                                   UV_ETIMEDOUT.rawValue, UV_ECONNABORTED.rawValue]

    private func advance(_ step: Step) {
        sent += step.sent
        offset += step.sent
        // A Unix socket's idle timeout counts bytes sent past libuv only from this stamp.
        if step.sent > 0 { stream.noteActivityIfTracked() }
        let left = step.wanted - step.sent
        remaining = left
        if left == 0 || (step.sent == 0 && !step.blocked) {
            // All sent, or the file ended before `count` bytes: done with what there was.
            succeed()
        } else if step.blocked {
            if let pollFailure, step.sent == 0 {
                fail(pollFailure)
                return
            }
            waitWritable()
        } else {
            sendNext()
        }
    }

    /// Waits on the loop (no pool thread) until the socket takes more.
    private func waitWritable() {
        phase = .waitingWritable
        let subscription = Poll.readiness(fd: duplicate, events: .writable, on: stream.loop).subscribe(next: { [self] _ in
            guard phase == .waitingWritable else { return }
            stopPolling()
            sendNext()
        }, error: { [self] error in
            guard phase == .waitingWritable else { return }
            stopPolling()
            // POLLERR: one more call gets the socket's own error (ECONNRESET rather than libuv's EBADF).
            pollFailure = error
            sendNext()
        })
        if phase == .waitingWritable {
            poll = subscription
        } else {
            subscription.dispose()  // it failed at once, and the answer already ran
        }
    }

    private func stopPolling() {
        let poll = self.poll
        self.poll = nil
        poll?.dispose()
    }

    /// The connection ended here or failed: the transfer stops with why.
    func streamEnded(_ reason: StreamConnection.EndReason) {
        guard phase != .ended else { return }
        fail(Self.stopError(reason, sent: sent, loop: stream.loop, context: context))
    }

    /// Why a transfer stopped when its connection ended: the connection's error, the loop's
    /// shutdown, or `ECANCELED` for a close here (with how many bytes went).
    static func stopError(_ reason: StreamConnection.EndReason, sent: Int, loop: EventLoop, context: String) -> any Error {
        switch reason {
        case .failed(let error): error
        case .shutDown: EventLoopError.shutDown(loop: loop.name)
        case .closed:
            UVError(code: UV_ECANCELED.rawValue,
                    message: "the connection was closed before the file was sent (\(sent) bytes went)", context: context)
        }
    }

    func fail(_ error: any Error) {
        end(.failure(error))
    }

    private func succeed() {
        end(.success(sent))
    }

    private func end(_ result: Result<Int, any Error>) {
        guard phase != .ended else { return }
        phase = .ended
        stopPolling()
        if let job {
            job.abandon()  // its end closes the duplicate
        } else {
            closeDuplicate()
        }
        outcome.finish(result)
        let onEnd = self.onEnd
        self.onEnd = nil
        onEnd?()
    }

    private func closeDuplicate() {
        if duplicate >= 0 { Glibc.close(duplicate) }
        duplicate = -1
    }
}

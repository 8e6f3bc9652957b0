internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension StreamConnection {
    /// Sends `count` bytes of `file` from `offset` to the peer, zero-copy (`sendfile(2)`), in its
    /// place among the connection's writes; sends how many bytes went, then completes.
    ///
    /// Earlier `send`/`write` bytes go first; `send`, `write`, `shutdown()` and `close()` called
    /// after it wait behind the file. The transfer starts now, subscribed or not (the result is
    /// replayed). A slow reader slows it (the loop polls for writability), nothing busy-waits. Writes
    /// held behind the file count against `StreamBufferLimits.maxQueuedBytes` (`ENOBUFS`) and the
    /// high-water mark (`writable`) as queued writes do.
    ///
    /// On a TLS connection the kernel cannot seal records: the file is read in 64 KiB chunks on the
    /// thread pool, each sealed and queued on the loop, one read at a time and only while the write
    /// queue is at or below `StreamBufferLimits.lowWaterMark` (a slow reader holds the file back, not
    /// memory). The count is then the bytes whose records the kernel took; a /proc or /sys file is
    /// sent when given a `count`.
    ///
    /// Errors: `EINVAL` for a negative offset or count, a file on another loop, or a file `sendfile`
    /// cannot send (a /proc or /sys file: read it and send the bytes); `EBADF` for a closed file;
    /// `EPIPE` after `close()`/`shutdown()`; the socket's error (`ECONNRESET`, `EPIPE`) when the peer
    /// goes away, which also ends the connection; `ECANCELED` when the connection is closed here
    /// first; `EventLoopError.shutDown`.
    ///
    /// - Parameters:
    ///   - file: An open regular file on the connection's loop.
    ///   - offset: Where to start in the file, 0 or more (default 0).
    ///   - count: How many bytes; nil (default) for all up to the end of the file (its size when the
    ///     transfer starts). A shorter file ends the transfer early, with the bytes it had.
    /// - Returns: A signal of the count sent, then completion.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public final func sendFile(_ file: OpenFile, offset: Int = 0, count: Int? = nil) -> Signal<Int> {
        let outcome = FileSendOutcome()
        let context = "sendfile \(file.path) to \(peerDescription)"
        if offset < 0 || (count ?? 0) < 0 {
            outcome.finish(.failure(UVError(code: UVError.invalidArgumentCode,
                                            message: "the offset and count must be 0 or more, not \(offset) and \(count.map(String.init) ?? "nil")",
                                            context: context)))
            return outcome.signal
        }
        guard file.loop === loop else {
            outcome.finish(.failure(UVError(code: UVError.invalidArgumentCode,
                                            message: "the file lives on loop '\(file.loop.name)', the connection on '\(loop.name)': open the file on the connection's loop",
                                            context: context)))
            return outcome.signal
        }
        let start: @Sendable () -> Void = { [self] in
            bits.busy = true
            // sendfile(2) would put the file's plaintext on the wire: a TLS stream reads and seals it.
            let operation: any FileTransfer = bits.tls
                ? SealedFileSend(stream: self, file: file, offset: offset, count: count, context: context, outcome: outcome)
                : FileSendOperation(stream: self, file: file, offset: offset, count: count, context: context, outcome: outcome)
            FileSends.of(self).enqueue(operation)
        }
        if onLoopThread {
            start()
        } else {
            do {
                try loop.tryExecute(start)
            } catch {
                outcome.finish(.failure(error))
            }
        }
        return outcome.signal
    }
}

/// One file going out on a stream, as `FileSends` drives it: the send-file family's backend seam
/// (loop thread only).
protocol FileTransfer: AnyObject {
    /// "sendfile PATH to PEER", for errors.
    var context: String { get }
    /// Told once when the transfer ended (its stream's `FileSends` releases what waited behind it).
    var onEnd: (() -> Void)? { get set }
    /// Begins, in its place after the writes queued before it.
    func start()
    /// libuv finished a write: the transfer may be waiting for the queue to drain.
    func queueMayHaveDrained()
    /// The connection ended here or failed: the transfer stops with why.
    func streamEnded(_ reason: StreamConnection.EndReason)
    /// Ends the transfer with `error` (nothing more is sent).
    func fail(_ error: any Error)
}

/// A stream's file transfers and the writes, shutdown and close held behind them, in order,
/// until the file ends (loop thread only).
final class FileSends {
    // Loop thread only (owned by its stream).
    private enum Held {
        case file(any FileTransfer)
        case bytes([UInt8], (((any Error)?) -> Void)?)
        case action(() -> Void)
    }

    private unowned(unsafe) let stream: StreamConnection
    private var active: (any FileTransfer)?
    private var held: [Held] = []
    /// What the held writes cost, each its payload plus `StreamConnection.perWriteOverhead`, counted
    /// with the queue's against the stream's limits (payload alone would let small writes behind a
    /// stalled file hold several times the limit).
    private var heldCost = 0

    private init(stream: StreamConnection) { self.stream = stream }

    /// The stream's transfers, made at its first file.
    static func of(_ stream: StreamConnection) -> FileSends {
        if let existing = stream.fileSends { return existing }
        let made = FileSends(stream: stream)
        stream.fileSends = made
        return made
    }

    var isHolding: Bool { active != nil }

    func enqueue(_ operation: any FileTransfer) {
        guard stream.isHandleOpen, stream.acceptsWrites else {
            operation.fail(UVError(code: UV_EPIPE.rawValue,
                                   message: stream.isHandleOpen ? "the connection was shut down for writing" : "the connection is closed",
                                   context: operation.context))
            return
        }
        if active != nil {
            held.append(.file(operation))
        } else {
            begin(operation)
        }
    }

    private func begin(_ operation: any FileTransfer) {
        active = operation
        operation.onEnd = { [self] in
            active = nil
            releaseHeld()
            // The held writes may have passed the high-water mark and all been taken at once: no write
            // callback would then say `writable` again.
            if active == nil, stream.isHandleOpen, !stream.isWritable, stream.queuedWriteCost <= stream.limits.lowWaterMark {
                stream.setWritable(true)
            }
        }
        operation.start()
    }

    /// Holds a write made while a file goes out; past the stream's limit it fails with `ENOBUFS`
    /// as any write does, and the high-water mark makes `writable` false.
    func hold(_ bytes: [UInt8], completion: (((any Error)?) -> Void)?) {
        let limits = stream.limits
        let cost = bytes.count + StreamConnection.perWriteOverhead
        let waiting = stream.queuedWriteCost + heldCost
        if waiting > 0 && waiting + cost > limits.maxQueuedBytes {
            let error = UVError(code: UV_ENOBUFS.rawValue,
                                message: "the connection's write queue is full (\(waiting) bytes waiting behind a file or unflushed, counting \(StreamConnection.perWriteOverhead) per write beside its payload, limit \(limits.maxQueuedBytes)): the peer is not reading fast enough; wait for `writable`",
                                context: "write of \(bytes.count) bytes to \(stream.peerDescription)")
            if let completion { completion(error) } else { stream.end(.failed(error)) }
            return
        }
        heldCost += cost
        held.append(.bytes(bytes, completion))
        if stream.isWritable && waiting + cost > limits.highWaterMark { stream.setWritable(false) }
    }

    /// Holds a shutdown or close asked for while a file goes out; false (nothing held) when no file is going out.
    func holdIfSending(_ action: @escaping () -> Void) -> Bool {
        guard active != nil else { return false }
        held.append(.action(action))
        return true
    }

    /// libuv finished a write: the active file may be waiting for the queue to drain.
    func writeFinished() {
        active?.queueMayHaveDrained()
    }

    /// The stream ended: the active file stops; what was held runs against the closed stream (and fails).
    func streamEnded(_ reason: StreamConnection.EndReason) {
        active?.streamEnded(reason)
    }

    /// Hands what was held back to the stream in order, until the next file.
    private func releaseHeld() {
        while !held.isEmpty, active == nil {
            let next = held.removeFirst()
            switch next {
            case .file(let operation):
                if stream.isHandleOpen && stream.acceptsWrites {
                    begin(operation)
                } else {
                    enqueue(operation)  // fails it with EPIPE
                }
            case .bytes(let bytes, let completion):
                heldCost -= bytes.count + StreamConnection.perWriteOverhead
                stream.sendOnLoop(bytes, completion: completion)
            case .action(let action):
                action()
            }
        }
    }
}

/// The result of one `sendFile`, replayed to every subscriber.
final class FileSendOutcome: @unchecked Sendable {
    // Sendable: `state` is behind its lock; subscribers are called after it is released.
    private enum State {
        case pending([Subscriber<Int>])
        case finished(Result<Int, any Error>)
    }
    private let state = LockedValue<State>(.pending([]))

    var signal: Signal<Int> {
        Signal { [self] subscriber in
            let finished: Result<Int, any Error>? = state.withLock { state in
                switch state {
                case .pending(var waiting):
                    waiting.append(subscriber)
                    state = .pending(waiting)
                    return nil
                case .finished(let result):
                    return result
                }
            }
            if let finished { Self.deliver(finished, to: subscriber) }
            return nil
        }.debugNamed("+sendFile")
    }

    /// Records the result and tells everyone waiting; later calls do nothing.
    func finish(_ result: Result<Int, any Error>) {
        let waiting: [Subscriber<Int>] = state.withLock { state in
            guard case .pending(let waiting) = state else { return [] }
            state = .finished(result)
            return waiting
        }
        for subscriber in waiting { Self.deliver(result, to: subscriber) }
    }

    private static func deliver(_ result: Result<Int, any Error>, to subscriber: Subscriber<Int>) {
        switch result {
        case .success(let count):
            subscriber.sendNext(count)
            subscriber.sendCompleted()
        case .failure(let error):
            subscriber.sendError(error)
        }
    }
}

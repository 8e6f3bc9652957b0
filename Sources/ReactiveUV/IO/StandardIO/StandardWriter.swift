internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension StandardIO {
    /// The process's writer for standard output (descriptor 1), on the calling loop thread's loop or else `EventLoop.shared`.
    ///
    /// Thread rule: safe from any thread.
    public static var output: StandardWriter { output(on: EventLoop.current ?? EventLoop.shared) }

    /// The process's writer for standard error (descriptor 2), on the calling loop thread's loop or else `EventLoop.shared`.
    ///
    /// Thread rule: safe from any thread.
    public static var error: StandardWriter { error(on: EventLoop.current ?? EventLoop.shared) }

    /// The process's writer for standard output (descriptor 1).
    ///
    /// One writer per descriptor at a time, so writes go out in order: the first call makes it on
    /// `loop`; later calls return it (whatever loop they name) until it closes, fails or its loop
    /// shuts down.
    ///
    /// Thread rule: safe from any thread.
    public static func output(on loop: EventLoop) -> StandardWriter {
        StandardWriter.shared(descriptor: 1, name: "standard output", on: loop)
    }

    /// The process's writer for standard error (descriptor 2); see `output(on:)`.
    ///
    /// Thread rule: safe from any thread.
    public static func error(on loop: EventLoop) -> StandardWriter {
        StandardWriter.shared(descriptor: 2, name: "standard error", on: loop)
    }
}

/// Writes to standard output or standard error (or another descriptor) with backpressure: `StandardIO.output`, `StandardIO.error`.
///
/// A terminal, pipe or stream socket is written on the loop through a libuv stream (bytes queue
/// while the reader is slower: `queuedWriteByteCount`); a file or device is written at once on
/// the loop thread, as Node does. Memory stays bounded when a producer waits for a write's
/// result (or for `queuedWriteByteCount` to fall) before writing more.
///
/// The descriptor is looked at on the first write. Errors come through the write's result and
/// the writer stays failed: `EPIPE` (the reader went away), `EBADF` (`>&-`), `EISDIR`, `ENOTSUP`,
/// `EventLoopError.shutDown`; `ENOBUFS` past `StreamBufferLimits.maxQueuedBytes` (still usable).
///
/// `close()` flushes, then closes the handle; the descriptor itself is never closed.
///
/// On a simulated loop, standard output and error are the simulation's: each write is captured
/// at once with its virtual time (`Simulation.standardOutput`), and the writers are the simulation's own.
///
/// Thread rule: every method is safe from any thread; work is done on the writer's loop (calls
/// made there run at once, others are queued there in order).
public final class StandardWriter: @unchecked Sendable, CustomStringConvertible {
    // Sendable: `descriptor`, `name`, `loop` and `limits` are immutable; `state` and `closeWaiters`
    // are confined to `loop`'s thread; `ended` is atomic and `openedStream` set once.
    private enum State {
        case unopened
        case stream(StreamConnection, StandardStreamOwner)
        case file
        /// On a simulated loop: each write goes into the simulation's capture at once.
        case captured(SimulatedSystem)
        case failed(any Error)
        case closed
    }

    /// The descriptor written to (1 for standard output, 2 for standard error).
    ///
    /// Thread rule: safe from any thread.
    public let descriptor: Int32
    /// The loop whose thread writes.
    ///
    /// Thread rule: safe from any thread.
    public let loop: EventLoop
    let name: String
    private let limits: StreamBufferLimits
    @exclusivity(unchecked) private var state = State.unopened
    @exclusivity(unchecked) private var closeWaiters: [WriteOutcome] = []
    /// The stream once opened, for `queuedWriteByteCount` on other threads.
    private let openedStream = LazyObject<StreamConnection>()
    /// Set once the writer closed or failed: the registry then makes a new one.
    private let ended = Atomic<Bool>(false)

    private static let writers = LockedValue<[Int32: StandardWriter]>([:])

    /// The registered writer for `descriptor`, or a new one on `loop`.
    static func shared(descriptor: Int32, name: String, on loop: EventLoop) -> StandardWriter {
        // A simulation's process has its own standard output: its writers are kept apart from the real ones.
        if let system = loop.simulatedSystem {
            if let writer = system.writers[descriptor], !writer.ended.load(ordering: .acquiring), writer.loop.acceptsNewHandles {
                return writer
            }
            let writer = StandardWriter(descriptor: descriptor, name: name, loop: loop)
            system.writers[descriptor] = writer
            return writer
        }
        return writers.withLock { writers in
            if let writer = writers[descriptor], !writer.ended.load(ordering: .acquiring), writer.loop.acceptsNewHandles {
                return writer
            }
            let writer = StandardWriter(descriptor: descriptor, name: name, loop: loop)
            writers[descriptor] = writer
            return writer
        }
    }

    /// A writer of `descriptor` on `loop` (tests pass a pipe's end; libuv closes a descriptor above 2 with its handle).
    init(descriptor: Int32, name: String, loop: EventLoop, limits: StreamBufferLimits = StreamBufferLimits()) {
        _ = ignoreBrokenPipeSignalOnce
        self.descriptor = descriptor
        self.name = name
        self.loop = loop
        self.limits = limits
    }

    /// `"standard output on loop main"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { "\(name) on loop \(loop.name)" }

    /// Queues `bytes` with no result to wait for: the cheap way to write many small pieces.
    ///
    /// Writes go out in call order with the other forms'. A failure is not lost: the writer stays
    /// failed (past `maxQueuedBytes`, with `ENOBUFS`), and the next write with a result, or
    /// `close()`, reports it. Wait for a result now and then to bound the queue.
    ///
    /// Thread rule: safe from any thread.
    public func send(_ bytes: [UInt8]) {
        if loop.inEventLoop {
            write(bytes, completion: nil)
        } else {
            // Refused only once the loop has shut down, which later writes and `close()` report.
            _ = loop.enqueue { self.write(bytes, completion: nil) }
        }
    }

    /// Queues `text` as UTF-8 (no newline added), as `send(_:)` does bytes.
    ///
    /// Thread rule: safe from any thread.
    public func send(_ text: String) {
        send(Array(text.utf8))
    }

    /// Queues `bytes` and calls `completion` once they were written (nil) or failed (see `StandardWriter`).
    ///
    /// Small writes made while earlier ones wait are copied into one buffer with them.
    ///
    /// Thread rule: safe from any thread; `completion` runs on the writer's loop thread
    /// (or on the calling thread with `EventLoopError.shutDown` when the loop has shut down).
    public func send(_ bytes: [UInt8], completion: sending @escaping ((any Error)?) -> Void) {
        if loop.inEventLoop {
            write(bytes, completion: completion)
            return
        }
        let box = UncheckedSendable(completion)
        if !loop.enqueue({ self.write(bytes, completion: box.value) }) {
            completion(loop.refusal)
        }
    }

    /// Queues `bytes` and returns a signal that completes once the kernel took them (replayed).
    ///
    /// The write starts now, whether or not the result is subscribed; writes go out in call order.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Signal<Void> {
        let outcome = WriteOutcome()
        send(bytes) { outcome.finish($0) }
        return outcome.signal
    }

    /// Writes `text` as UTF-8 (no newline added); see `write(_:)`.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func write(_ text: String) -> Signal<Void> {
        write(Array(text.utf8))
    }

    /// Bytes written to a pipe, socket or terminal that the reader has not taken yet; 0 for a file, or once closed.
    ///
    /// Exact on the writer's loop thread; elsewhere what the loop last published.
    ///
    /// Thread rule: safe from any thread; never blocks.
    public var queuedWriteByteCount: Int {
        if loop.inEventLoop, case .stream(let stream, _) = state { return stream.loopQueuedWriteByteCount }
        return openedStream.load()?.queuedWriteByteCount ?? 0
    }

    /// Flushes what is queued, then closes the writer's handle; the descriptor stays open, its flags
    /// restored once no other `StandardIO` stream shares its description.
    ///
    /// Later writes fail with `EPIPE`; the next `StandardIO.output`/`error` call makes a new writer.
    ///
    /// - Returns: A signal that completes once flushed and closed, or fails with the error that ended
    ///   the writer (or `EventLoopError.shutDown`). It starts now, whether or not subscribed.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func close() -> Signal<Void> {
        let outcome = WriteOutcome()
        if loop.inEventLoop {
            closeWhenFlushed(outcome)
        } else if !loop.enqueue({ self.closeWhenFlushed(outcome) }) {
            outcome.finish(loop.refusal)
        }
        return outcome.signal
    }

    // MARK: - loop thread

    private func write(_ bytes: [UInt8], completion: (((any Error)?) -> Void)?) {
        if case .unopened = state { open() }
        switch state {
        case .unopened, .closed:
            completion?(UVError(code: UV_EPIPE.rawValue, message: "the writer was closed", context: "write to \(name)"))
        case .failed(let error):
            completion?(error)
        case .file:
            let error = writeFile(bytes)
            completion?(error)
        case .captured(let system):
            let error = system.capture(bytes, descriptor: descriptor, on: loop)
            if let error { fail(error) }
            completion?(error)
        case .stream(let stream, _):
            guard let completion else {
                stream.sendOnLoop(bytes, completion: nil)
                return
            }
            stream.sendOnLoop(bytes) { [self] error in
                // A write cancelled because an earlier one failed reports that failure.
                if let error = error as? UVError, error.code == UV_ECANCELED.rawValue, case .failed(let cause) = state {
                    completion(cause)
                } else {
                    completion(error)
                }
            }
        }
    }

    /// Looks at the descriptor and opens what writes it.
    private func open() {
        if let system = loop.simulatedSystem, descriptor == 1 || descriptor == 2 {
            state = .captured(system)
            return
        }
        if loop.isSimulated {
            fail(loop.simulationRefusal("StandardIO", what: "a writer of \(name)"))
            return
        }
        let kind: StandardIO.Kind
        switch StandardIO.kind(of: descriptor, name: name) {
        case .success(let found): kind = found
        case .failure(let error):
            fail(error)
            return
        }
        guard let transport = kind.transport else {
            state = .file
            return
        }
        guard loop.acceptsNewHandles else {
            fail(EventLoopError.shutDown(loop: loop.name))
            return
        }
        guard DescriptorClaims.claim(descriptor) else {
            fail(UVError(code: UV_EBUSY.rawValue, message: "\(name) already has an open stream in this process",
                         context: "StandardWriter"))
            return
        }
        let stream: StreamConnection, owner: StandardStreamOwner
        do {
            (stream, owner) = try StandardStreamOwner.openStream(
                on: descriptor, transport: transport, limits: limits, name: name,
                origin: "from StandardIO (\(name))", loop: loop)
        } catch {
            fail(error)
            return
        }
        owner.onEnd = { [self] reason in streamDidEnd(reason) }
        // Sends without a result also go through libuv's queue, so those made meanwhile are written together.
        stream.bits.batchesSends = true
        _ = openedStream.storeIfNil(stream)
        state = .stream(stream, owner)
    }

    /// Writes all of `bytes` to a file or device now; nil, or the error (which fails the writer).
    private func writeFile(_ bytes: [UInt8]) -> (any Error)? {
        guard let error = StandardDescriptors.writeAll(bytes, to: descriptor, name: name) else { return nil }
        fail(error)
        return error
    }

    /// The stream ended by itself (a failed write, the loop's shutdown) or because the writer closed it.
    private func streamDidEnd(_ reason: StreamConnection.EndReason) {
        switch reason {
        case .closed: if case .stream = state { state = .closed }
        case .failed(let error): fail(error)
        case .shutDown: fail(EventLoopError.shutDown(loop: loop.name))
        }
    }

    private func fail(_ error: any Error) {
        if case .closed = state { return }
        state = .failed(error)
        ended.store(true, ordering: .releasing)
        let waiters = closeWaiters
        closeWaiters = []
        for waiter in waiters { waiter.finish(error) }
    }

    private func closeWhenFlushed(_ outcome: WriteOutcome) {
        switch state {
        case .failed(let error):
            outcome.finish(error)
        case .closed:
            outcome.finish(nil)
        case .unopened, .file, .captured:
            state = .closed
            ended.store(true, ordering: .releasing)
            outcome.finish(nil)
        case .stream(let stream, _):
            closeWaiters.append(outcome)
            // Once every write was called back; a failure on the way fails the waiters first.
            if closeWaiters.count == 1 { stream.whenWritesFinished { [self] in finishClose() } }
        }
    }

    /// Every write finished and someone asked to close: close the handle and tell them.
    private func finishClose() {
        guard case .stream(let stream, let owner) = state else { return }
        state = .closed
        ended.store(true, ordering: .releasing)
        stream.end(.closed)
        owner.release()
        let waiters = closeWaiters
        closeWaiters = []
        for waiter in waiters { waiter.finish(nil) }
    }
}

// The public API of a connection: it hops to the connection's loop, then calls the loop-thread
// core (`StreamCore*.swift`). The class itself, its stored state and `description` are in `StreamCore.swift`.
extension StreamConnection {
    /// What the peer sends, one chunk (at most 64 KiB) per read.
    ///
    /// Subscribing starts reading; disposing stops it (the connection stays
    /// open). It completes at EOF (the peer shut down its side, or the
    /// connection was closed here) and fails with a `UVError` such as
    /// `ECONNRESET` when the connection breaks. A second subscriber while one
    /// is reading gets `EBUSY`. Chunks are delivered on the subscriber's home
    /// loop; subscribe on the connection's loop to get them without a hop.
    ///
    /// Thread rule: safe from any thread.
    ///
    /// Each read of the property makes a small signal object: a connection nobody reads holds none.
    public var bytes: Signal<[UInt8]> {
        SourceSignal(StreamBytesSource(stream: self)).debugNamed("+bytes(\(peerDescription))")
    }

    /// Reads the connection into `reader`, a `StreamReader` shared by many connections: the
    /// callback form of `bytes`, with no subscription and no object for this connection.
    ///
    /// The reader gets each chunk, then `completed` at EOF or a close here, or `error` when the
    /// connection breaks, the loop shuts down, or the connection already has a reader (`EBUSY`: a
    /// `bytes` subscriber or another `read(with:)`; that reader goes on). On a connection that has
    /// already ended, the reader is told so at once. `stopReading()` stops it; the connection
    /// stays open and can be read again. See `StreamReader` for what it shares with `bytes` and
    /// what it leaves out.
    ///
    /// - Parameter reader: The callbacks, run on the connection's loop thread.
    ///
    /// Thread rule: safe from any thread (called elsewhere, the reading starts on the connection's
    /// loop, in order with the other calls made there; after the loop has shut down, `reader`'s
    /// `error` gets `EventLoopError.shutDown` on the calling thread).
    public final func read(with reader: StreamReader) {
        if onLoopThread {
            startReading(sharedBy: reader)
            return
        }
        do {
            try loop.tryExecute { self.startReading(sharedBy: reader) }
        } catch {
            reader.error(self, error)
        }
    }

    /// Stops the reading `read(with:)` started, telling its reader nothing; the connection stays
    /// open, and what the peer sends waits in the socket until it is read again. A `bytes`
    /// subscriber is not stopped by this (dispose its subscription).
    ///
    /// Thread rule: safe from any thread (called elsewhere, it takes effect on the connection's loop,
    /// in order with the other calls made there; chunks read before then are still delivered).
    public final func stopReading() {
        onLoop(nil) { $0.stopSharedReader() }
    }

    /// Queues `bytes` for sending, with no result to wait for: the fast path.
    ///
    /// The array is not copied: libuv sends from its storage. On a TCP or Unix
    /// socket with nothing queued, called on the connection's loop, the bytes
    /// are written at once (what the kernel takes; the rest is queued in
    /// order), so a send costs no request and no callback. A failure (the
    /// peer reset, or the queue limit in `StreamBufferLimits` was hit) ends the
    /// connection, and `bytes` fails with the error. After `close()` or
    /// `shutdown()` the bytes are refused (use `send(_:completion:)` or
    /// `write(_:)` to see the `EPIPE`).
    ///
    /// - Parameter bytes: The bytes to send.
    ///
    /// Thread rule: safe from any thread (no lock and no allocation beyond libuv's request pool on the loop thread).
    public final func send(_ bytes: [UInt8]) {
        if onLoopThread {
            sendOnLoop(bytes, completion: nil)
            return
        }
        if let refusal = admitFromAnotherThread(bytes.count) {
            // As on the loop, the refusal ends the connection; one hop does it, however many are refused.
            if !extras.overflowEndRequested.exchange(true, ordering: .relaxed) {
                onLoop(nil) { $0.end(.failed(refusal)) }
            }
            return
        }
        // After shutdown the connection is closed: the rejection message is all there is to say.
        if !hop(counting: bytes.count, { $0.sendOnLoop(bytes, completion: nil) }) {
            loop.execute {}  // reports the refusal
        }
    }

    /// Queues `bytes` and calls `completion` on the connection's loop thread once libuv flushed them (nil) or failed.
    ///
    /// The callback form of `write(_:)`, for code that writes at a high rate
    /// and needs each result (a pump keeping N writes in flight): no signal
    /// and no subscription per write. The errors are `write(_:)`'s; after the
    /// loop has shut down, `completion` gets `EventLoopError.shutDown` on the
    /// calling thread, and a send from another thread past the queue limit gets
    /// `ENOBUFS` there too (it is counted before it leaves the calling thread).
    ///
    /// - Parameters:
    ///   - bytes: The bytes to send (not copied).
    ///   - completion: Called once with nil when flushed, or the error.
    ///
    /// Thread rule: safe from any thread; `completion` runs on the connection's loop thread.
    public final func send(_ bytes: [UInt8], completion: sending @escaping ((any Error)?) -> Void) {
        guard onLoopThread else {
            sendFromAnotherThread(bytes, completion: completion)
            return
        }
        sendOnLoop(bytes, completion: completion)
    }

    /// `send(_:completion:)` off the loop: counted, then hopped to the loop. Not inlined, so that
    /// the loop thread's call stays a check and a call.
    @inline(never)
    private func sendFromAnotherThread(_ bytes: [UInt8], completion: sending @escaping ((any Error)?) -> Void) {
        if let refusal = admitFromAnotherThread(bytes.count) {
            completion(refusal)
            return
        }
        // Like a signal's callbacks, the closure is handed to the loop thread and only run there.
        let box = UncheckedSendable(completion)
        if !hop(counting: bytes.count, { $0.sendOnLoop(bytes, completion: box.value) }) {
            completion(loop.refusal)
        }
    }

    /// Queues `bytes` and returns a signal that completes once libuv has flushed them to the kernel.
    ///
    /// The write starts now, not when the result is subscribed, so writes go
    /// out in call order; the result is replayed to every subscriber. It fails
    /// with `EPIPE` after `close()`/`shutdown()`, `ENOBUFS` past the
    /// `StreamBufferLimits.maxQueuedBytes` limit (the connection stays open),
    /// `ECANCELED` if the connection closed before the bytes were flushed, or
    /// the socket's error (which also ends the connection).
    ///
    /// - Parameter bytes: The bytes to send (not copied).
    /// - Returns: A signal that completes (no value) when flushed, or fails.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public final func write(_ bytes: [UInt8]) -> Signal<Void> {
        let outcome = WriteOutcome()
        if onLoopThread {
            sendOnLoop(bytes, completion: outcome.finish)
        } else if let refusal = admitFromAnotherThread(bytes.count) {
            outcome.finish(refusal)
        } else if !hop(counting: bytes.count, { $0.sendOnLoop(bytes, completion: outcome.finish) }) {
            outcome.finish(loop.refusal)
        }
        return outcome.signal
    }

    /// Whether the connection takes more writes without growing past its high-water mark: Node's `'drain'`.
    ///
    /// Sends the current state at once, then `false` when a write takes the
    /// queue's cost (each queued write's payload plus a fixed per-write
    /// overhead, see `StreamBufferLimits`) above `highWaterMark`, and `true`
    /// once it has drained to `lowWaterMark`; it completes when the
    /// connection ends. A sender that must not lose messages pauses at
    /// `false` and goes on at `true`, instead of meeting `ENOBUFS` at
    /// `maxQueuedBytes`:
    ///
    /// ```swift
    /// connection.writable.subscribeNext { canWrite in
    ///     if canWrite { producer.resume() } else { producer.pause() }
    /// }
    /// ```
    ///
    /// Thread rule: safe from any thread; values arrive on the subscriber's home loop.
    public var writable: Signal<Bool> {
        Signal { [self] subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "\(transport.connectionTypeName).writable") { _ in
                self.watchWritable(subscriber)
            }
        }.debugNamed("+writable(\(peerDescription))")
    }

    /// Half-closes the connection: sends EOF (FIN on TCP) once the queued writes are flushed; reading goes on.
    ///
    /// - Returns: A signal that completes when the EOF was sent, or fails
    ///   (`ENOTCONN` if already shut down or closed). The shutdown starts now.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public final func shutdown() -> Signal<Void> {
        let outcome = WriteOutcome()
        onLoop(outcome) { $0.shutdownWrites(outcome: outcome) }
        return outcome.signal
    }

    /// Closes the connection gracefully: every byte queued before the call is sent, then EOF (FIN on TCP), then the socket closes.
    ///
    /// At once: reading stops (the `bytes` reader completes) and later writes
    /// fail with `EPIPE`. The writes already queued keep going; once libuv has
    /// flushed them, EOF goes out after the last byte and the socket is closed
    /// (the owner then forgets the connection; `isOpen` turns false). Nothing
    /// queued is dropped, so `for try await chunk in connection.bytes.values
    /// { connection.send(chunk) }; connection.close()` echoes everything even
    /// when the peer half-closed long before reading.
    ///
    /// A peer that never reads keeps the connection open while the queue waits
    /// (it still counts against the server's `maxConnections`): `reset()`, the
    /// owner's disposal or the loop's shutdown close it at once. Calling it
    /// again, or after `shutdown()`, is fine (each call's signal reports the
    /// same close).
    ///
    /// - Returns: A signal (replayed to every subscriber) that completes once
    ///   the queued bytes were flushed and the socket closed, or fails: with the
    ///   socket's error when the flush failed (the peer reset), `ECANCELED` when
    ///   `reset()` or the owner's disposal closed the connection first,
    ///   `EventLoopError.shutDown` when the loop shut down first. On a connection
    ///   that had already ended, it completes at once (or fails with the error
    ///   that ended it). The close starts now, whether or not it is subscribed.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public final func close() -> Signal<Void> {
        let outcome = WriteOutcome()
        onLoop(outcome) { $0.closeWhenFlushed(outcome: outcome) }
        return outcome.signal
    }

    /// Closes the connection at once, dropping what is queued: the abortive close (RST on TCP, by `SO_LINGER` 0).
    ///
    /// Writes not yet flushed are dropped (their completions and signals fail
    /// with `ECANCELED`, as does a `close()` still flushing), and a TCP peer's
    /// next read fails with `ECONNRESET` (a Unix-socket peer reads EOF, or
    /// `ECONNRESET` if it had sent bytes nobody read). Use it for a peer that misbehaves or
    /// never reads; `close()` is the ordinary close.
    ///
    /// Thread rule: safe from any thread.
    public final func reset() {
        onLoop(nil) { $0.end(.closed, reset: true) }
    }

    /// Whether the connection is still open (true while `close()` is still flushing).
    ///
    /// On the connection's loop thread, exact. Elsewhere, what the loop last
    /// published (it changes on the loop as the connection closes): reading it
    /// never waits for the loop.
    ///
    /// Thread rule: safe from any thread; never blocks.
    public final var isOpen: Bool {
        if onLoopThread { return isHandleOpen }
        return isOpenForAnyThread
    }

    /// Bytes written but not yet taken by the kernel (see `StreamBufferLimits`); 0 once closed.
    ///
    /// On the connection's loop thread, exact; elsewhere, the figure the loop
    /// published after its last write or flush plus the bytes sent from other
    /// threads that are still on their way to the loop (so a thread's own
    /// earlier sends are counted). Reading it never waits for the loop.
    ///
    /// Thread rule: safe from any thread; never blocks.
    public final var queuedWriteByteCount: Int {
        if onLoopThread { return loopQueuedWriteByteCount }
        guard isOpenForAnyThread, let extras = extrasIfMade else { return 0 }  // closed, or nothing ever queued
        return extras.publishedWriteQueue.load(ordering: .relaxed) + extras.sendsInTransit.load(ordering: .relaxed)
    }

    /// Counts a send made off the loop against `maxQueuedBytes` now, before its hop: nil when
    /// admitted (its bytes and cost then wait in `sendsInTransit` and `costInTransit` until `hop`
    /// takes them off), else the `ENOBUFS`.
    ///
    /// The queue on the loop (as last published) plus what other threads have in transit, plus
    /// this send's payload and `StreamConnection.perWriteOverhead`: past the limit it is refused, unless
    /// nothing is queued or in transit (a single large write always goes, as on the loop).
    private func admitFromAnotherThread(_ byteCount: Int) -> UVError? {
        // The counters live in the stream's extras, made by the first send from another thread.
        let extras = extras
        let cost = byteCount + StreamConnection.perWriteOverhead
        let inTransit = extras.costInTransit.wrappingAdd(cost, ordering: .relaxed).newValue
        let queued = max(0, extras.publishedWriteCost.load(ordering: .relaxed))
        let before = queued + inTransit - cost
        if before > 0 && before + cost > limits.maxQueuedBytes {
            extras.costInTransit.wrappingSubtract(cost, ordering: .relaxed)
            return queueFullError(queuedCost: before, byteCount: byteCount)
        }
        extras.sendsInTransit.wrappingAdd(byteCount, ordering: .relaxed)
        return nil
    }

    /// Hands a send made off the loop (admitted by `admitFromAnotherThread`) to the loop; its cost
    /// stay in transit until the loop has queued it. False when the loop refused it (it has shut down).
    private func hop(counting byteCount: Int, _ body: @escaping @Sendable (StreamConnection) -> Void) -> Bool {
        // Made by `admitFromAnotherThread` already.
        let extras = extras
        let cost = byteCount + StreamConnection.perWriteOverhead
        let accepted = loop.enqueue {
            body(self)
            // After the send published the queue: a reader may count the bytes twice for a moment, never zero times.
            extras.sendsInTransit.wrappingSubtract(byteCount, ordering: .relaxed)
            extras.costInTransit.wrappingSubtract(cost, ordering: .relaxed)
        }
        if !accepted {
            extras.sendsInTransit.wrappingSubtract(byteCount, ordering: .relaxed)
            extras.costInTransit.wrappingSubtract(cost, ordering: .relaxed)
        }
        return accepted
    }

    private func onLoop(_ outcome: WriteOutcome?, _ body: @escaping @Sendable (StreamConnection) -> Void) {
        if onLoopThread {
            body(self)
            return
        }
        do {
            try loop.tryExecute { body(self) }
        } catch {
            // The loop is gone and its shutdown closed the connection.
            outcome?.finish(error)
        }
    }
}

/// A stream's `bytes`: a source of its own so that a reader subscribed on the stream's loop with
/// `subscribe(next:error:completed:)` reads through its sink, with no `Subscriber` in between
/// (`HomeGate`). Every other reader goes the usual way: a gate, hopped to the loop through `LoopBinding`.
///
/// Thread rule: `attach` on the subscription's home thread; the stream's state is its loop's.
struct StreamBytesSource: SignalSource {
    /// The stream read (immutable here; its state is its loop's).
    let stream: StreamConnection

    static func attach(_ observer: Observer<[UInt8]>, to subscription: Subscription, signal: SourceSignal<Self>) {
        let stream = signal.source.stream
        if let sink = HomeGate.directSink(for: observer, in: subscription, on: stream.loop) {
            subscription.add(stream.startReading(.sink(sink)))
            return
        }
        Signal { subscriber in
            // The description is composed only if the subscription fails for want of a loop.
            LoopBinding.open(on: stream.loop, for: subscriber, what: "\(stream.transport.connectionTypeName).bytes") { _ in
                stream.startReading(subscriber)
            }
        }.attach(observer, to: subscription)
    }
}

internal import CLibUV

// Writing: the pooled write requests, the queue's cost and its limit, backpressure and `writable`.
extension StreamConnection {
    /// What one queued write holds beyond its payload, counted against `StreamBufferLimits`: the
    /// array's header, the `uv_write_t` and the `WriteRequest` around it, as the live heap shows
    /// (`StreamMemoryBoundTests`). A send from another thread holds its hop's closure instead
    /// until the loop queues it: counted the same.
    static let perWriteOverhead = 360

    /// Pauses reading above the high-water mark and resumes at or below the low-water mark.
    ///
    /// Measured in payload bytes waiting in libuv's queue (what the kernel has not taken), as
    /// `queuedWriteByteCount` reports: reading pauses for bytes the peer is slow to take. The
    /// limit and `writable` count the queue's memory cost instead (`perWriteOverhead`).
    func updateBackpressure() {
        guard isHandleOpen, limits.pausesReading else { return }
        let queued = loopQueuedWriteByteCount
        if !bits.writeBackpressure && queued > limits.highWaterMark {
            bits.writeBackpressure = true
        } else if bits.writeBackpressure && queued <= limits.lowWaterMark {
            bits.writeBackpressure = false
        }
        updateReading()
    }

    // MARK: - writing

    /// Queues `bytes`; `completion` (if any) learns when they are flushed or why they were not.
    func sendOnLoop(_ bytes: [UInt8], completion: (((any Error)?) -> Void)?) {
        assertInEventLoop()
        guard isHandleOpen, bits.writableInPlainLane else {
            // The TLS lane (chosen once per connection) seals its writes first: it shares this test.
            if isHandleOpen, !bits.writesShutDown { return sendSealedOnLoop(bytes, completion: completion) }
            let reason = isHandleOpen ? "the connection was shut down for writing" : "the connection is closed"
            completion?(UVError(code: UV_EPIPE.rawValue, message: reason, context: "write to \(peerDescription)"))
            return
        }
        guard let cost = admitSend(bytes, completion: completion) else { return }
        queueWrite(bytes, cost: cost, completion: completion)
    }

    /// What every send checks before its bytes are queued (plain, or sealed in the TLS lane): the cost
    /// to queue them, or nil when the send was answered here (empty, held behind a file, or refused as
    /// past the queue's bound).
    @inline(__always)
    final func admitSend(_ bytes: [UInt8], completion: (((any Error)?) -> Void)?) -> Int? {
        if bytes.isEmpty {
            completion?(nil)
            return nil
        }
        bits.busy = true
        // A file is going out: these bytes follow it (StreamConnection+SendFile.swift).
        if let fileSends, fileSends.isHolding {
            fileSends.hold(bytes, completion: completion)
            return nil
        }
        let cost = bytes.count + StreamConnection.perWriteOverhead
        if queuedWriteCost > 0 && queuedWriteCost + cost > limits.maxQueuedBytes {
            let error = queueFullError(queuedCost: queuedWriteCost, byteCount: bytes.count)
            if let completion { completion(error) } else { end(.failed(error)) }
            return nil
        }
        return cost
    }

    /// Writes `bytes` (already sealed, in the TLS lane) now if the kernel takes them, else queues
    /// them as a request or into the batch; `cost` is what they count against the queue's limit.
    @inline(__always)
    final func queueWrite(_ bytes: [UInt8], cost: Int, completion: (((any Error)?) -> Void)?) {
        var written = 0
        if completion == nil, bits.mayTryWrite, transport == .tcp || (transport == .pipe && !ipc) {
            // Nobody waits for this write's result: try it now. With nothing queued (libuv answers
            // EAGAIN otherwise, and no batch is waiting, so the order holds) the kernel usually takes
            // all of it, and no request, callback or pooled object is involved; what it did not take
            // is queued below.
            switch tryWriting(bytes) {
            case .all:
                noteActivityIfTracked()
                return
            case .some(let count):
                if count > 0 { noteActivityIfTracked() }
                written = count
            case .failed(let failure):
                end(.failed(failure))
                return
            }
        }
        // A write is queued: its cost and request live in the extras, made now if this is the first.
        let extras = self.extras
        if joinsBatch(bytes.count - written, extras) {
            addToBatch(bytes, from: written, cost: cost, completion: completion, extras)
            return
        }
        // A larger write follows the batch gathered before it.
        if bits.coalescing {
            startBatch(extras)
            guard isHandleOpen else {
                completion?(closedError("write"))
                return
            }
        }
        // `pooled` owns a reference: libuv keeps it while the write is pending (see `keepForReuse`).
        let pooled = pooledRequest(extras)
        // Borrowed: the reference `pooled` owns keeps it alive; libuv never calls back inside uv_write.
        let result = pooled._withUnsafeGuaranteedRef { request in
            request.completion = completion
            request.cost = cost
            return io.write(bytes, skipping: written, with: request)
        }
        if result < 0 {
            pooled._withUnsafeGuaranteedRef { $0.reset() }
            keepForReuse(pooled, in: extras)
            let failure = UVError(code: result, context: "write to \(peerDescription)")
            completion?(failure)
            end(.failed(failure))
            return
        }
        extras.requestsInFlight += 1
        extras.writeRequestsStarted += 1
        extras.queuedWriteCost += cost
        didQueue(extras)
    }

    /// A write was queued (as a request or into the batch): publishes the queue and its cost,
    /// and turns `writable` and reading off past the high-water mark.
    func didQueue(_ extras: StreamExtras) {
        let queuedNow = loopQueuedWriteByteCount
        extras.publishedWriteQueue.store(queuedNow, ordering: .relaxed)
        extras.publishedWriteCost.store(extras.queuedWriteCost, ordering: .relaxed)
        if extras.isWritable && extras.queuedWriteCost > limits.highWaterMark { setWritable(false) }
        if !bits.writeBackpressure && queuedNow > limits.highWaterMark { updateBackpressure() }
    }

    /// A request from the stream's pool, or a new one; the result owns a reference (see `keepForReuse`).
    func pooledRequest(_ extras: StreamExtras) -> Unmanaged<WriteRequest> {
        if extras.writePoolCount > 0, let writePool = extras.writePool {
            extras.writePoolCount -= 1
            return writePool[extras.writePoolCount]
        }
        return Unmanaged.passRetained(WriteRequest(loop: loop))
    }

    private enum TryWrite {
        /// The kernel took every byte.
        case all
        /// It took this many (maybe 0: the socket's buffer is full, or writes are queued); the rest must be queued.
        case some(Int)
        /// The socket failed (the peer reset, a broken pipe).
        case failed(UVError)
    }

    /// `uv_try_write`: writes what the kernel takes now, only when nothing is queued.
    private func tryWriting(_ bytes: [UInt8]) -> TryWrite {
        let result = io.tryWrite(bytes)
        if result == UV_EAGAIN.rawValue { return .some(0) }
        if result < 0 { return .failed(UVError(code: result, context: "write to \(peerDescription)")) }
        // uv_try_write returns an int: a write larger than Int32.max is taken in parts, the rest queued.
        let count = Int(result)
        return count == bytes.count ? .all : .some(count)
    }

    /// The `ENOBUFS` of a write past `maxQueuedBytes`, with the figures.
    func queueFullError(queuedCost: Int, byteCount: Int) -> UVError {
        UVError(code: UV_ENOBUFS.rawValue,
                message: "the connection's write queue is full (\(queuedCost) bytes queued, counting \(StreamConnection.perWriteOverhead) per write beside its payload, limit \(limits.maxQueuedBytes)): the peer is not reading fast enough; wait for `writable`",
                context: "write of \(byteCount) bytes to \(peerDescription)")
    }

    /// libuv called `write` back; `write` owns the reference libuv held (see `keepForReuse`).
    func writeDidFinish(_ write: Unmanaged<WriteRequest>, status: Int32) {
        // Taking the completions forgets the payload.
        let (cost, completion, batched) = write._withUnsafeGuaranteedRef { ($0.cost, $0.takeCompletion(), $0.takeBatchCompletions()) }
        // Made when the write was queued (a write is only ever started by `send`, which makes them).
        let extras = self.extras
        keepForReuse(write, in: extras)
        extras.queuedWriteCost -= cost
        extras.requestsInFlight -= 1
        if status == 0 {
            // The writes gathered behind this one go out before its callers hear of it.
            if extras.requestsInFlight == 0, bits.coalescing, isHandleOpen { startBatch(extras) }
            if isHandleOpen {
                extras.publishedWriteQueue.store(loopQueuedWriteByteCount, ordering: .relaxed)
                extras.publishedWriteCost.store(extras.queuedWriteCost, ordering: .relaxed)
            }
            noteActivityIfTracked()
            if !extras.isWritable && extras.queuedWriteCost <= limits.lowWaterMark { setWritable(true) }
            completion?(nil)
            for each in batched { each.body(nil) }
            if bits.writeBackpressure { updateBackpressure() }
            fileSends?.writeFinished()
            if extras.requestsInFlight == 0, !isHandleOpen { cancelBatch(extras) }
            runFlushWaitersIfFlushed(extras)
            return
        }
        if isHandleOpen {
            extras.publishedWriteQueue.store(loopQueuedWriteByteCount, ordering: .relaxed)
            extras.publishedWriteCost.store(extras.queuedWriteCost, ordering: .relaxed)
        }
        let error = status == UV_ECANCELED.rawValue ? unflushedError() : UVError(code: status, context: "write to \(peerDescription)")
        completion?(error)
        for each in batched { each.body(error) }
        if status != UV_ECANCELED.rawValue { end(.failed(error)) }
        // libuv has called back every request the ended stream had: the batch behind them fails last.
        if extras.requestsInFlight == 0, !isHandleOpen { cancelBatch(extras) }
        runFlushWaitersIfFlushed(extras)
    }

    /// Puts a finished request (and the reference `write` owns) into the pool, or releases it when the pool is full or the stream closed.
    ///
    /// The pool (in the extras) is a stack of `writePoolLimit` slots, allocated on the first
    /// finished write and freed in `didClose()`. Each entry owns one reference, handed to libuv
    /// when the request starts and taken back in `streamWriteCallback`: no retain, release,
    /// or array bookkeeping per write.
    func keepForReuse(_ write: Unmanaged<WriteRequest>, in extras: StreamExtras) {
        guard isHandleOpen, extras.writePoolCount < StreamConnection.writePoolLimit else {
            write.release()
            return
        }
        let pool = extras.writePool ?? {
            let slots = UnsafeMutablePointer<Unmanaged<WriteRequest>>.allocate(capacity: StreamConnection.writePoolLimit)
            extras.writePool = slots
            return slots
        }()
        // Unmanaged is a trivial type: the slots need no initialization or deinitialization.
        pool[extras.writePoolCount] = write
        extras.writePoolCount += 1
    }
}

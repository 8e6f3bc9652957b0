internal import CLibUV

/// Small writes gathered into one buffer while earlier writes are in libuv's hands.
///
/// A program that writes line by line (a filter, a logger behind `StandardIO.output`) would
/// otherwise make one `write(2)` per line, and wake its reader once per line. A write made
/// while nothing is in flight still goes out at once, so a lone write waits for nothing.
///
/// Thread rule: loop thread only (a field of its stream's extras).
struct WriteBatch {
    /// The gathered writes' bytes, copied, in call order.
    var bytes: [UInt8] = []
    /// The gathered writes' completions, in call order (writes made without one add none).
    var completions: [WriteCompletion] = []
    /// What the gathered writes count in the queue's cost: each one's payload plus `perWriteOverhead`.
    var cost = 0
}

/// One gathered write's completion. A struct, so that an array of them holds each closure as it
/// is: an array of bare closures stores them generically, with a thunk at each append and call.
struct WriteCompletion {
    let body: ((any Error)?) -> Void

    init(_ body: @escaping ((any Error)?) -> Void) { self.body = body }
}

// Coalescing: a write of at most `coalescedWriteLimit` bytes made while one of the stream's
// requests is in flight (libuv has not called it back) is copied into the open batch instead
// of becoming a request of its own. The batch goes out as one request when the last request in
// flight is called back, when it reaches `batchLimit`, or before anything that must follow it
// (a larger write, a shutdown). Each write keeps its completion: they run in call order when
// the batch's request is called back, all with its result, so an error fails every write in the
// batch. A stream that ends with a batch still open fails its writes as libuv fails the
// requests it had queued (`ECANCELED`), after those. IPC pipes do not coalesce: a write that
// carries a descriptor (`uv_write2`) must keep its place among the others.
extension StreamConnection {
    /// Writes of at most this many bytes are copied into the open batch; larger ones are their own request.
    static let coalescedWriteLimit = 4096
    /// A batch this large goes out at once (behind the requests in flight), and the next one starts.
    static let batchLimit = 64 << 10

    /// Whether the write about to be queued (`byteCount` bytes) joins the open batch, or opens one.
    @inline(__always)
    func joinsBatch(_ byteCount: Int, _ extras: StreamExtras) -> Bool {
        byteCount <= StreamConnection.coalescedWriteLimit && (bits.coalescing || (extras.requestsInFlight > 0 && !ipc))
    }

    /// Copies `bytes[start...]` into the open batch (opening one), with its completion and cost.
    func addToBatch(_ bytes: [UInt8], from start: Int, cost: Int, completion: (((any Error)?) -> Void)?, _ extras: StreamExtras) {
        if !bits.coalescing {
            bits.coalescing = true
            // As large as the last batch was: a steady writer's batch then grows without copying.
            extras.batch.bytes.reserveCapacity(max(extras.lastBatchByteCount, bytes.count - start))
        }
        bytes.withUnsafeBufferPointer { extras.batch.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0[start...])) }
        if let completion { extras.batch.completions.append(WriteCompletion(completion)) }
        extras.batch.cost += cost
        extras.queuedWriteCost += cost
        if extras.batch.bytes.count >= StreamConnection.batchLimit { startBatch(extras) }
        didQueue(extras)
    }

    /// Hands the open batch to libuv as one request (nothing when none is open). A refusal
    /// fails each of its writes and ends the stream.
    func startBatch(_ extras: StreamExtras) {
        guard bits.coalescing else { return }
        bits.coalescing = false
        var batch = WriteBatch()
        swap(&batch, &extras.batch)
        extras.lastBatchByteCount = batch.bytes.count
        let pooled = pooledRequest(extras)
        let result = pooled._withUnsafeGuaranteedRef { request in
            request.batchCompletions = batch.completions
            request.cost = batch.cost
            return io.write(batch.bytes, with: request)
        }
        if result >= 0 {
            extras.requestsInFlight += 1
            extras.writeRequestsStarted += 1
            return
        }
        pooled._withUnsafeGuaranteedRef { $0.reset() }
        keepForReuse(pooled, in: extras)
        extras.queuedWriteCost -= batch.cost
        let failure = UVError(code: result, context: "write to \(peerDescription)")
        for completion in batch.completions { completion.body(failure) }
        end(.failed(failure))
    }

    /// The stream ended with a batch that never went out: its writes fail as libuv's cancelled requests do.
    func cancelBatch(_ extras: StreamExtras) {
        guard bits.coalescing else { return }
        bits.coalescing = false
        var batch = WriteBatch()
        swap(&batch, &extras.batch)
        extras.queuedWriteCost -= batch.cost
        let error = unflushedError()
        for completion in batch.completions { completion.body(error) }
    }

    /// Runs `body` once every write queued so far (the requests and the batch; not a file being
    /// sent) has been called back: at once when none is pending. A stream that ends first runs
    /// it after libuv's last cancellation. What `StandardWriter.close()` waits for.
    func whenWritesFinished(_ body: @escaping () -> Void) {
        assertInEventLoop()
        guard let extras = extrasIfMade, extras.requestsInFlight > 0 || bits.coalescing else {
            body()
            return
        }
        extras.flushWaiters.append(body)
    }

    /// Runs the flush waiters once nothing is in flight or gathered.
    func runFlushWaitersIfFlushed(_ extras: StreamExtras) {
        guard extras.requestsInFlight == 0, !bits.coalescing, !extras.flushWaiters.isEmpty else { return }
        let waiters = extras.flushWaiters
        extras.flushWaiters = []
        for waiter in waiters { waiter() }
    }

    /// The bytes of the open batch (0 when none is open).
    var batchedByteCount: Int {
        bits.coalescing ? extrasIfMade?.batch.bytes.count ?? 0 : 0
    }

    /// The `ECANCELED` of a write whose bytes were not flushed before the stream closed.
    func unflushedError() -> UVError {
        UVError(code: UV_ECANCELED.rawValue, message: "the connection closed before the bytes were flushed",
                context: "write to \(peerDescription)")
    }
}

internal import CLibUV
import Synchronization

/// Something a write request reports its result to (through the default `writeRequestCallback`).
protocol StreamWriteOwner: AnyObject {
    /// Called on the loop thread when libuv called back for `request`.
    func writeDidFinish(_ request: WriteRequest, status: Int32)
}

/// Something a shutdown request reports its result to.
protocol StreamShutdownOwner: AnyObject {
    /// Called on the loop thread when the shutdown request finished.
    func shutdownDidFinish(_ request: ShutdownRequest, status: Int32)
}

/// One `uv_write_t`, reused: a stream keeps finished ones in a small pool, so
/// a steady stream of writes allocates nothing but the payloads it is given.
///
/// The payload array is held until libuv calls back, and libuv reads straight
/// from its storage (no copy): a native array's elements stay where they are
/// while the array is alive and not mutated, and this one is never mutated.
///
/// Thread rule: loop thread only.
final class WriteRequest: LoopRequest {
    // Loop thread only. The owner outlives its pending requests: closing the stream
    // makes libuv call every pending write back before the close callback. Byte
    // streams have none: their own callback (`streamWriteCallback`) goes to the stream.
    unowned(unsafe) let owner: (any StreamWriteOwner)?
    @exclusivity(unchecked) private(set) var payload: [UInt8] = []
    /// Who waits for the result (`write(_:)`, `send(_:completion:)`); nil for `send(_:)`.
    @exclusivity(unchecked) var completion: (((any Error)?) -> Void)?
    /// A coalesced request's waiters, in the order of their writes (`StreamCore+Coalescing.swift`); empty otherwise.
    @exclusivity(unchecked) var batchCompletions: [WriteCompletion] = []
    /// What the request counts in its stream's queue cost (`StreamConnection.perWriteOverhead` per write it carries).
    @exclusivity(unchecked) var cost = 0

    init(loop: EventLoop, owner: (any StreamWriteOwner)?) {
        self.owner = owner
        // Not in the loop's request list: the stream handle accounts for it (see LoopRequest).
        super.init(loop: loop, type: UV_WRITE, tracked: false)
    }

    override var label: String { "write of \(payload.count) bytes" }

    /// Starts writing `bytes` to `stream`; libuv calls `callback` when done (by default `finish(status:)` via the owner).
    ///
    /// `handingOver`: see `LoopRequest.willStart(handingOver:)`; only with a callback that takes the reference over.
    func start(_ bytes: [UInt8], to stream: UnsafeMutablePointer<uv_stream_t>,
               handingOver: Bool = false, callback: uv_write_cb = writeRequestCallback) throws(UVError) {
        let result = startWrite(bytes, to: stream, handingOver: handingOver, callback: callback)
        if result < 0 { throw UVError(code: result, context: "uv_write") }
    }

    /// `start` without the error value: libuv's result (negative when it refused and nothing is pending).
    ///
    /// `skipping`: bytes at the front already written (by `uv_try_write`), 0..<`bytes.count`; the
    /// request still holds the whole array.
    func startWrite(_ bytes: [UInt8], skipping written: Int = 0, to stream: UnsafeMutablePointer<uv_stream_t>,
                    handingOver: Bool, callback: uv_write_cb) -> Int32 {
        payload = bytes
        let base = bytes.withUnsafeBufferPointer { UnsafeMutableRawPointer(mutating: $0.baseAddress!) }
        // libuv copies the uv_buf_t itself into the request; only the bytes must stay put.
        var buffer = uv_buf_t(base: (base + written).assumingMemoryBound(to: CChar.self), len: bytes.count - written)
        willStart(handingOver: handingOver)
        let result = uv_write(pointer(as: uv_write_t.self), stream, &buffer, 1, callback)
        if result < 0 {
            startFailed(handingOver: handingOver)
            payload = []
        }
        return result
    }

    /// Forgets the payload and the completions, for reuse.
    func reset() {
        payload = []
        completion = nil
        batchCompletions = []
    }

    /// Forgets the payload and hands the completion over (moved out, not copied), for reuse.
    func takeCompletion() -> (((any Error)?) -> Void)? {
        payload = []
        var taken: (((any Error)?) -> Void)? = nil
        swap(&taken, &completion)
        return taken
    }

    /// Hands a coalesced request's completions over (moved out), leaving none.
    func takeBatchCompletions() -> [WriteCompletion] {
        var taken: [WriteCompletion] = []
        swap(&taken, &batchCompletions)
        return taken
    }

    fileprivate func finish(status: Int32) {
        didFinish()
        owner?.writeDidFinish(self, status: status)
    }
}

/// The default write callback: reports to the request's owner.
let writeRequestCallback: uv_write_cb = { request, status in
    guard let data = request?.pointee.data else { return }
    Unmanaged<WriteRequest>.fromOpaque(data).takeRetainedValue().finish(status: status)
}

/// One `uv_shutdown_t`: sends FIN once the queued writes are flushed.
///
/// Thread rule: loop thread only.
final class ShutdownRequest: LoopRequest {
    // Loop thread only; the owner outlives the pending request (see WriteRequest).
    unowned(unsafe) let owner: any StreamShutdownOwner
    let outcome: WriteOutcome?

    init(loop: EventLoop, owner: any StreamShutdownOwner, outcome: WriteOutcome?) {
        self.owner = owner
        self.outcome = outcome
        super.init(loop: loop, type: UV_SHUTDOWN)
    }

    override var label: String { "shutdown" }

    func start(_ stream: UnsafeMutablePointer<uv_stream_t>) throws(UVError) {
        let request = pointer(as: uv_shutdown_t.self)
        try start("uv_shutdown") { uv_shutdown(request, stream, shutdownRequestCallback) }
    }

    fileprivate func finish(status: Int32) {
        didFinish()
        owner.shutdownDidFinish(self, status: status)
    }
}

private let shutdownRequestCallback: uv_shutdown_cb = { request, status in
    guard let data = request?.pointee.data else { return }
    Unmanaged<ShutdownRequest>.fromOpaque(data).takeRetainedValue().finish(status: status)
}

/// The result of one write or shutdown, replayed to every subscriber of the signal `write(_:)` returned.
///
/// The write starts when `write(_:)` is called, not when the signal is
/// subscribed, so consecutive writes go out in call order whoever subscribes.
///
/// Thread rule: safe from any thread.
final class WriteOutcome: @unchecked Sendable {
    // `state` is protected by `lock` (inline: no allocation per outcome); subscribers are called after it is released.
    private enum State {
        case pending([Subscriber<Void>])
        case finished((any Error)?)
    }
    private let lock = SpinLock()
    @exclusivity(unchecked) private var state = State.pending([])

    /// A signal that completes when the write is flushed, or fails with its error.
    var signal: Signal<Void> {
        Signal { [self] subscriber in
            observe(subscriber)
            return nil
        }.debugNamed("+write")
    }

    private func observe(_ subscriber: Subscriber<Void>) {
        lock.lock()
        switch state {
        case .pending(var waiting):
            state = .pending([])  // so `waiting` is the array's only reference: the append below does not copy it
            waiting.append(subscriber)
            state = .pending(waiting)
            lock.unlock()
        case .finished(let error):
            lock.unlock()
            WriteOutcome.deliver(error, to: subscriber)
        }
    }

    /// Records the result and tells everyone waiting. Later calls do nothing.
    func finish(_ error: (any Error)?) {
        lock.lock()
        guard case .pending(let waiting) = state else {
            lock.unlock()
            return
        }
        state = .finished(error)
        lock.unlock()
        for subscriber in waiting { WriteOutcome.deliver(error, to: subscriber) }
    }

    private static func deliver(_ error: (any Error)?, to subscriber: Subscriber<Void>) {
        if let error {
            subscriber.sendError(error)
        } else {
            subscriber.sendCompleted()
        }
    }
}

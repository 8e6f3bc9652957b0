import Synchronization

/// `OpenFile.chunks`: reads from an offset to the end, `depth` reads ahead on the pool (a pool thread reads
/// while the loop delivers), delivered in order and paused by the consumer's flow control.
final class ChunkedFileRead: LoopDisposable, @unchecked Sendable {
    // Everything but `disposedFlag` (atomic) and the immutable settings is loop thread only (`dispose()` hops there).
    /// Reads in flight or waiting for delivery, at most.
    static let depth = 3

    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let file: OpenFile
    private let chunkSize: Int
    /// Where the next read starts.
    private var nextOffset: Int
    /// Where the next chunk to deliver starts.
    private var deliverOffset: Int
    private var subscriber: Subscriber<[UInt8]>?
    /// Reads in flight, by offset.
    private var inFlight: [Int: FileOperation<[UInt8]>] = [:]
    /// Reads done but not yet delivered (a later offset finished first), by offset.
    private var ready: [Int: Result<[UInt8], any Error>] = [:]
    /// The consumer asked to pause: no new read starts until it resumes.
    private var paused = false
    /// Tells the subscriber of the loop's shutdown, which a reader with no read in flight would not hear of.
    private var shutdownRegistration: (any Disposable)?

    init(file: OpenFile, offset: Int, chunkSize: Int, subscriber: Subscriber<[UInt8]>) {
        self.loop = file.loop
        self.file = file
        self.nextOffset = offset
        self.deliverOffset = offset
        self.chunkSize = chunkSize
        self.subscriber = subscriber
    }

    /// Registers the flow control and starts the first reads (loop thread); returns self as the disposable.
    func start() -> (any Disposable)? {
        // Strong captures: the subscription's teardown drops the flow control, `finish()` the registration.
        subscriber?.setFlowControl(pause: { self.paused = true }, resume: { self.resume() })
        shutdownRegistration = loop.shutdownObservers.add { self.loopShutDown() }
        if shutdownRegistration == nil { loopShutDown() } else { fill() }
        return self
    }

    /// The loop shuts down (loop thread): the subscriber learns it now, whatever is in flight.
    private func loopShutDown() {
        guard let subscriber else { return }
        finish()
        subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
    }

    private func resume() {
        paused = false
        deliverReady()
        fill()
    }

    /// Starts reads until `depth` are in flight or waiting; completes at the largest offset.
    private func fill() {
        while subscriber != nil, !paused, inFlight.count + ready.count < Self.depth, nextOffset < Int.max {
            // The last read stops at the largest offset (a device such as /dev/zero has bytes up to it).
            let (offset, count, path) = (nextOffset, min(chunkSize, Int.max - nextOffset), file.path)
            nextOffset += count
            let job = file.run("read", { descriptor, _ in
                try OpenFile.readBytes(descriptor, at: offset, count: count, context: "read \(path)")
            }, simulated: { files, descriptor throws(UVError) in
                try files.read(descriptor, at: offset, count: count, context: "read \(path)")
            }) { [self] result in
                inFlight[offset] = nil
                guard subscriber != nil, offset >= deliverOffset else { return }
                ready[offset] = result
                deliverReady()
                fill()
            }
            if let job, ready[offset] == nil, subscriber != nil { inFlight[offset] = job }
        }
        // Every byte up to the largest offset was delivered: no read can start past it.
        if let subscriber, !paused, deliverOffset == Int.max, inFlight.isEmpty, ready.isEmpty {
            finish()
            subscriber.sendCompleted()
        }
    }

    /// Delivers the chunks that are next in order.
    private func deliverReady() {
        while !paused, let subscriber, let result = ready.removeValue(forKey: deliverOffset) {
            switch result {
            case .success(let chunk) where chunk.isEmpty:
                finish()
                subscriber.sendCompleted()
            case .success(let chunk):
                deliverOffset += chunk.count
                if chunk.count < chunkSize {
                    // The end (or a file still growing): reads started past it are misaligned; read on from here.
                    dropReadsAhead()
                    nextOffset = deliverOffset
                }
                subscriber.sendNext(chunk)
            case .failure(let error):
                finish()
                subscriber.sendError(error)
            }
        }
    }

    private func dropReadsAhead() {
        for job in inFlight.values { job.abandon() }
        inFlight = [:]
        ready = [:]
    }

    private func finish() {
        subscriber = nil
        dropReadsAhead()
        shutdownRegistration?.dispose()
        shutdownRegistration = nil
    }

    func abandon() {
        finish()
    }
}

/// One `OpenFile.append`, waiting in the file's queue of appends until the one before it ends.
final class QueuedAppend: LoopDisposable, @unchecked Sendable {
    // Everything but `disposedFlag` (atomic) and the immutable `work` is loop thread only (`dispose()` hops there).
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let file: OpenFile
    private let work: @Sendable (Int32, JobStopFlag) throws -> Int
    private let simulated: SimulatedFileWork<Int>
    private var subscriber: Subscriber<Int>?
    private var job: FileOperation<Int>?

    init(file: OpenFile, subscriber: Subscriber<Int>, simulated: @escaping SimulatedFileWork<Int>,
         work: @escaping @Sendable (Int32, JobStopFlag) throws -> Int) {
        self.loop = file.loop
        self.file = file
        self.subscriber = subscriber
        self.simulated = simulated
        self.work = work
    }

    /// Runs the append (its turn came); the file's next append starts when it ends.
    func start() {
        guard subscriber != nil else { return file.appendEnded() }
        job = file.run("append", work, simulated: simulated) { [self] result in
            job = nil
            subscriber.take()?.sendOnce(result)
        }
        // It failed to start (the completion told the subscriber).
        guard let job else { return file.appendEnded() }
        // The next append starts when this job has ended, also when it was disposed while running.
        job.onEnd { [file] in file.appendEnded() }
    }

    func abandon() {
        subscriber = nil
        // A queued append is skipped when its turn comes; a running one stops between its requests.
        job?.abandon()
    }
}

extension OpenFile {
    /// Runs `start` now if no append is running, else after the ones queued (loop thread).
    func enqueueAppend(_ start: @escaping () -> Void) {
        if appendRunning {
            appends.append(start)
        } else {
            appendRunning = true
            start()
        }
    }

    /// The running append ended: the next queued one starts (loop thread).
    func appendEnded() {
        if appends.isEmpty { appendRunning = false } else { appends.removeFirst()() }
    }
}

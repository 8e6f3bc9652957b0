import Synchronization

/// `OpenFile.chunks`: one read job at a time from an offset to the end, paused by the consumer's flow control.
final class ChunkedFileRead: LoopDisposable, @unchecked Sendable {
    // Everything but `disposedFlag` (atomic) and the immutable settings is loop thread only (`dispose()` hops there).
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let file: OpenFile
    private let chunkSize: Int
    private var offset: Int
    private var subscriber: Subscriber<[UInt8]>?
    private var job: FileJob<[UInt8]>?
    /// The consumer asked to pause: the next read waits for the resume.
    private var paused = false
    /// A chunk arrived while paused: the resume starts the next read.
    private var readWaits = false

    init(file: OpenFile, offset: Int, chunkSize: Int, subscriber: Subscriber<[UInt8]>) {
        self.loop = file.loop
        self.file = file
        self.offset = offset
        self.chunkSize = chunkSize
        self.subscriber = subscriber
    }

    /// Registers the flow control and starts the first read (loop thread); returns self as the disposable.
    func start() -> (any Disposable)? {
        // Strong captures, as the stream's: the cycle ends when the subscription's teardown drops the flow control.
        subscriber?.setFlowControl(pause: { self.paused = true }, resume: { self.resume() })
        read()
        return self
    }

    private func resume() {
        paused = false
        if readWaits && subscriber != nil {
            readWaits = false
            read()
        }
    }

    private func read() {
        let (offset, count, path) = (self.offset, chunkSize, file.path)
        job = file.run("read", { descriptor, _ in
            try OpenFile.readBytes(descriptor, at: offset, count: count, context: "read \(path)")
        }) { [self] result in
            job = nil
            guard let subscriber else { return }
            switch result {
            case .success(let chunk) where chunk.isEmpty:
                self.subscriber = nil
                subscriber.sendCompleted()
            case .success(let chunk):
                self.offset += chunk.count
                subscriber.sendNext(chunk)
                guard self.subscriber != nil else { return }
                if paused {
                    readWaits = true
                } else {
                    read()
                }
            case .failure(let error):
                self.subscriber = nil
                subscriber.sendError(error)
            }
        }
    }

    func abandon() {
        subscriber = nil
        job?.abandon()
        job = nil
    }
}

/// One `OpenFile.append`, waiting in the file's queue of appends until the one before it ends.
final class QueuedAppend: LoopDisposable, @unchecked Sendable {
    // Everything but `disposedFlag` (atomic) and the immutable `work` is loop thread only (`dispose()` hops there).
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let file: OpenFile
    private let work: @Sendable (Int32, JobStopFlag) throws -> Int
    private var subscriber: Subscriber<Int>?
    private var job: FileJob<Int>?

    init(file: OpenFile, subscriber: Subscriber<Int>, work: @escaping @Sendable (Int32, JobStopFlag) throws -> Int) {
        self.loop = file.loop
        self.file = file
        self.subscriber = subscriber
        self.work = work
    }

    /// Runs the append (its turn came); the file's next append starts when it ends.
    func start() {
        guard subscriber != nil else {
            file.appendEnded()
            return
        }
        job = file.run("append", work) { [self] result in
            job = nil
            let subscriber = self.subscriber
            self.subscriber = nil
            switch result {
            case .success(let count):
                subscriber?.sendNext(count)
                subscriber?.sendCompleted()
            case .failure(let error):
                subscriber?.sendError(error)
            }
        }
        guard let job else {
            // It failed to start (the completion told the subscriber).
            file.appendEnded()
            return
        }
        // The next append starts when this job has ended, also when it was disposed while running.
        let fileEnd = job.onEnd
        job.onEnd = { [file] in
            fileEnd?()
            file.appendEnded()
        }
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
        guard !appends.isEmpty else {
            appendRunning = false
            return
        }
        let next = appends.removeFirst()
        next()
    }
}

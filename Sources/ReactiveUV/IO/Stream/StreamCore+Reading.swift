internal import CLibUV

// Reading: one reader at a time (a `bytes` subscriber or a shared `StreamReader`), paused by write
// backpressure or by the reader's flow control, fed from the loop's read buffer or, in bulk, from
// arrays handed over whole.
extension StreamConnection {
    /// Reads up to this many bytes are copied into the loop's `spareReadChunk` (see `smallChunk`).
    private static let spareChunkLimit = 4096


    /// Makes `subscriber` the reader; returns what stops it, or nil when it was already answered.
    final func startReading(_ subscriber: Subscriber<[UInt8]>) -> (any Disposable)? {
        startReading(.subscriber(subscriber))
    }

    /// Makes `subscriber` (a gate, or a sink on this loop: `HomeGate`) the reader; returns what
    /// stops it, or nil when it was already answered.
    final func startReading(_ subscriber: HomeGate<[UInt8]>) -> (any Disposable)? {
        guard admitReader(.gate(subscriber)) else { return nil }
        switch subscriber {
        case .subscriber(let gate) where !bits.readerIsHome:
            registerFlowControl(with: gate)
        case .subscriber, .sink:
            // Made when a consumer first asks (most readers never pause): see `makeFlowControl(for:)`.
            subscriber.subscription.deferFlowControl(to: self)
        }
        switch subscriber {
        case .sink(let sink):
            // No gate at the sink's root: the stream takes that place, and is told at teardown.
            assert(!sink.hasRoot, "a sink reader's subscription already has a root")
            sink.attachRoot(self)
            return nil
        case .subscriber:
            return ReaderToken(self)
        }
    }

    /// Makes `reader`, shared by many connections, this stream's reader (`read(with:)`): no
    /// subscription, no token and no flow control; `stopSharedReader()` stops it.
    final func startReading(sharedBy reader: StreamReader) {
        admitReader(.shared(reader))
    }

    /// What every reader goes through: an ended stream answers it at once, a second reader gets
    /// `EBUSY`, and otherwise it becomes the reader and reading starts (unless write backpressure
    /// holds it). False when the reader was answered instead.
    @discardableResult
    private func admitReader(_ reader: StreamReaderTarget) -> Bool {
        assertInEventLoop()
        if bits.input == .ended {
            reader.sendCompleted(from: self)
            return false
        }
        guard isHandleOpen else {
            switch endReason {
            case .failed(let error)?: reader.sendError(error, from: self)
            case .shutDown?: reader.sendError(EventLoopError.shutDown(loop: loop.name), from: self)
            case .closed?, nil: reader.sendCompleted(from: self)
            }
            return false
        }
        guard readers.reader == nil else {
            reader.sendError(UVError(code: UV_EBUSY.rawValue,
                                     message: "the connection is already being read (by a `bytes` subscriber or a `StreamReader`): a byte stream has one reader at a time",
                                     context: "\(transport.connectionTypeName).bytes of \(peerDescription)"), from: self)
            return false
        }
        bits.writeBackpressure = limits.pausesReading && loopQueuedWriteByteCount > limits.highWaterMark
        bits.consumerPaused = false
        bits.input = .paused
        readers.fill(reader)
        switch reader {
        case .gate(let gate): bits.readerIsHome = gate.homeIdentity == loopIdentity
        case .shared: bits.readerIsHome = true
        }
        if let error = updateReading() {
            readers.take()
            bits.input = .idle
            reader.sendError(error, from: self)
            return false
        }
        return true
    }

    /// The reader's flow control, registered with it.
    @discardableResult
    private func registerFlowControl(with subscriber: Subscriber<[UInt8]>) -> FlowControl? {
        // Strong captures: a weak one would give the stream a side table and slow every
        // retain of it; the cycle ends when the subscription's teardown drops the flow control.
        subscriber.setFlowControl(
            pause: { self.setConsumerPaused(true) },
            resume: { self.setConsumerPaused(false) })
        return subscriber.registeredFlowControl
    }

    package final func makeFlowControl(for subscription: Subscription) -> FlowControl? {
        guard let reader = readers.reader, reader.subscription === subscription else { return nil }
        switch reader {
        case .gate(.subscriber(let gate)):
            return registerFlowControl(with: gate)
        case .shared:
            return nil
        case .gate(.sink):
            // A reader on this loop: nothing is hopped, so there is nothing for a gate to count.
            return FlowControl(sourceScheduler: loop, pause: { self.setConsumerPaused(true) },
                               resume: { self.setConsumerPaused(false) })
        }
    }

    private func setConsumerPaused(_ paused: Bool) {
        guard readers.reader != nil else { return }
        bits.consumerPaused = paused
        updateReading()
    }

    /// Starts or stops libuv's reading to match the reader and both pause reasons.
    @discardableResult
    final func updateReading() -> UVError? {
        guard isHandleOpen, readers.reader != nil, bits.input == .reading || bits.input == .paused else { return nil }
        let shouldRead = !bits.writeBackpressure && !bits.consumerPaused
        if shouldRead && bits.input == .paused {
            if let error = io.startReading(ipc: ipc, tls: bits.tls) { return error }
            bits.input = .reading
            if ipc { descriptorsMayBePending() }
            if bits.tls { tlsReadingResumed() }
        } else if !shouldRead && bits.input == .reading {
            io.stopReading()
            bits.input = .paused
        }
        return nil
    }

    /// Whether libuv is reading for a reader now (not idle, paused or ended).
    final var isReading: Bool { bits.input == .reading }
    /// Open and not shut down for writing.
    final var acceptsWrites: Bool { isHandleOpen && !bits.writesShutDown }

    /// Stops reading and ends the reader (completes it with nil, else fails it); the stream stays open and can be read again.
    final func endReader(_ error: (any Error)?) {
        assertInEventLoop()
        if bits.input == .reading { io.stopReading() }
        if bits.input != .ended { bits.input = .idle }
        bits.consumerPaused = false
        guard let reader = readers.take() else { return }
        if let error { reader.sendError(error, from: self) } else { reader.sendCompleted(from: self) }
    }

    /// Stops reading for the reader `token` belongs to (a later reader keeps reading).
    final func stopReading(_ token: ReaderToken<StreamConnection>) {
        stopDisposedReader()
    }

    /// Stops reading for the current reader if its subscription is disposed (a replaced reader's
    /// disposal leaves the next one reading: `ReaderSlot.currentReaderIsDisposed`). Loop thread only.
    private func stopDisposedReader() {
        assertInEventLoop()
        guard readers.currentReaderIsDisposed else { return }
        dropReader()
    }

    /// Stops a shared reader (`StreamConnection.stopReading()`), telling it nothing; a `bytes`
    /// subscriber is left alone (its subscription's disposal stops it). Loop thread only.
    final func stopSharedReader() {
        assertInEventLoop()
        guard case .shared? = readers.reader else { return }
        dropReader()
    }

    /// Empties the reader slot without telling the reader, and stops libuv's reading.
    private func dropReader() {
        readers.take()
        if bits.input == .reading { io.stopReading() }
        if bits.input != .ended { bits.input = .idle }
        bits.consumerPaused = false
    }

    /// A sink reader's subscription was torn down (the stream is its root: `startReading`): stops
    /// reading for it, if it is still the current reader. On the loop's thread, or queued there (a
    /// home loop that has closed tears down on the disposer's thread; a loop refusing work has
    /// ended its readers already).
    @usableFromInline
    package final func releaseObserver(of _: Subscription) {
        if loop.inEventLoop {
            stopDisposedReader()
        } else {
            _ = loop.enqueue { [self] in stopDisposedReader() }
        }
    }

    /// The memory the next read goes into, and its size.
    ///
    /// Small reads (requests, messages) go into the loop's shared buffer and are copied out at
    /// their size. Once a read fills half a buffer, the stream reads straight into a fresh
    /// full-size array that the reader then gets trimmed to the bytes read (`BulkReads` says when
    /// that stops): a bulk transfer is never copied, at the price of spare capacity in its chunks.
    /// The array's storage stays put between the two callbacks: `bulkChunk` holds it uniquely
    /// and nothing resizes it.
    func readBuffer() -> (UnsafeMutableRawPointer, Int) {
        guard bits.bulkReads != .off else { return (loop.readBuffer, readChunkLimit) }
        let size = readChunkLimit
        // Bulk reads keep their array in the extras: an idle connection holds no slot for it.
        let extras = self.extras
        if extras.bulkChunk.count != size {
            // Every byte is written by the read before any is looked at; the rest is trimmed unread.
            extras.bulkChunk = [UInt8](unsafeUninitializedCapacity: size) { _, count in count = size }
        }
        return (UnsafeMutableRawPointer(extras.bulkChunk.withUnsafeMutableBufferPointer { $0.baseAddress! }), size)
    }

    /// libuv read `count` bytes into `base` (the memory `readBuffer()` gave), or reports EOF or an error.
    func didRead(_ count: Int, at base: UnsafeMutableRawPointer?) {
        if count > 0 {
            noteActivityIfTracked()
            bits.busy = true
            let wasBulk = bits.bulkReads != .off
            bits.bulkReads = bits.bulkReads.after(reading: count, limit: readChunkLimit)
            // A bulk read's array is handed over when the read filled a quarter of it at least, so a
            // chunk's spare capacity stays under 4x (2x but for the short read that ends a burst);
            // a shorter one is copied out below and its array let go of (an idle connection keeps none).
            // Moved out of the extras, so trimming it below finds it unique and copies nothing.
            var bulkChunk = wasBulk ? extrasIfMade?.takeBulkChunk() ?? [] : []
            // Each branch hands its chunk straight to the reader (no local copy kept past the call).
            if !bulkChunk.isEmpty, count >= readChunkLimit / 4 {
                bulkChunk.removeLast(bulkChunk.count - count)
                readers.reader?.deliver(bulkChunk, from: self, home: bits.readerIsHome)
            } else if bits.readerIsHome, count <= StreamConnection.spareChunkLimit, let base {
                // Only for a reader on this thread: a chunk hopped to another loop is released there,
                // and the thread sanitizer cannot see the runtime's ordering between that release
                // and a refill here (a reader elsewhere gets a fresh array per read).
                if let reader = readers.reader { reader.deliver(smallChunk(UnsafeRawBufferPointer(start: base, count: count)), from: self, home: true) }
            } else if let reader = readers.reader {
                reader.deliver(ReadBuffer.copy(base, count: count), from: self, home: bits.readerIsHome)
            }
            // A short bulk read was copied out of `bulkChunk`'s storage: it lives until here.
            withExtendedLifetime(bulkChunk) {}
            if ipc { didReadOnIPCPipe() }
        } else if count == endOfFileCode {
            io.stopReading()
            bits.input = .ended
            bits.peerEnded = true
            extrasIfMade?.bulkChunk = []
            let reader = readers.take()
            let control = reader?.registeredFlowControl
            reader?.sendCompleted(from: self)
            owner?.streamDidReadEndOfFile(self)
            if !limits.allowsHalfOpen, let reader { closeOnceEndTaken(home: reader.subscription?.home ?? loop, control: control) }
        } else if count == Int(UV_ENOBUFS.rawValue) && ipc {
            // `peekBeforeIPCRead` found nothing to read and gave libuv no room: nothing happened.
        } else if count < 0 {
            end(.failed(UVError(code: Int32(count), context: "reading from \(peerDescription)")))
        }
    }

    /// Copies a small read into the loop's `spareReadChunk` and returns it, without allocating when possible.
    ///
    /// The loop keeps a reference to the chunk it handed out last, and the next small read of any of
    /// its streams refills that storage in place once the reader has let go of it (Array's
    /// copy-on-write makes a new array otherwise, so no chunk a reader holds ever changes): small
    /// request/response reads allocate nothing, and a connection keeps no chunk between reads.
    private func smallChunk(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let loop = self.loop
        if bytes.count == loop.spareReadChunk.count {
            loop.spareReadChunk.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        } else if bytes.count <= loop.spareReadChunk.capacity {
            loop.spareReadChunk.removeAll(keepingCapacity: true)
            loop.spareReadChunk.append(contentsOf: bytes)
        } else {
            loop.spareReadChunk = Array(bytes)
        }
        return loop.spareReadChunk
    }
}

internal import CLibUV
import Synchronization

/// `StandardIO.input` on a simulated loop: the simulation's scripted standard input, each part
/// read once it has arrived (its virtual time), at most `ReadBuffer.size` bytes a read, then EOF
/// at the scripted end. One reader at a time (`EBUSY`, as on a real descriptor); what a reader
/// did not take stays for the next. A consumer's pause stops the reads until it resumes.
///
/// Listed with the loop like a libuv handle (the leak check sees a reader left open); each read
/// is a callback of the loop (queued, or the timer of the next arrival) and goes into the trace.
///
/// Thread rule: loop thread only (the simulation's driving thread), except `dispose()` and `disposedFlag`.
final class SimulatedStandardInput: SubscriberHandle<[UInt8]>, @unchecked Sendable {
    // Sendable: every stored var is touched on the loop thread only (dispose() hops there).
    private let system: SimulatedSystem
    private var arrivalTimer: (any Disposable)?
    private var readQueued = false
    private var paused = false

    private init(loop: EventLoop, system: SimulatedSystem, subscriber: Subscriber<[UInt8]>) {
        self.system = system
        super.init(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE), subscriber: subscriber)
    }

    override var label: String { "standard input from StandardIO.input (simulated)" }

    /// Starts reading the simulation's standard input for `subscriber`, or fails it (`EBUSY`).
    static func open(system: SimulatedSystem, loop: EventLoop, subscriber: Subscriber<[UInt8]>) -> (any Disposable)? {
        guard system.inputReader == nil else {
            subscriber.sendError(UVError(code: UV_EBUSY.rawValue,
                                         message: "standard input already has a reader: it is read by one subscriber at a time",
                                         context: "StandardIO.input"))
            return nil
        }
        let reader = SimulatedStandardInput(loop: loop, system: system, subscriber: subscriber)
        reader.didOpenSimulated(as: UV_NAMED_PIPE)
        system.inputReader = reader
        let box = UncheckedSendable(reader)
        subscriber.setFlowControl(pause: { box.value.paused = true }, resume: {
            box.value.paused = false
            box.value.scheduleRead()
        })
        reader.scheduleRead()
        return reader
    }

    /// Queues a read when something arrived (or the end), else arms the timer of the next arrival.
    func scheduleRead() {
        guard isHandleOpen, !paused, !readQueued else { return }
        arrivalTimer.take()?.dispose()
        let now = system.now
        if system.inputArrived(by: now) {
            readQueued = true
            loop.execute { [self] in read() }
        } else if let next = system.nextInputArrival {
            arrivalTimer = loop.schedule(after: .nanoseconds(Int64(clamping: next - now))) { [self] in
                arrivalTimer = nil
                read()
            }
        }
    }

    /// One read: what arrived (up to a buffer), else the end; then the next.
    private func read() {
        readQueued = false
        guard isHandleOpen, !paused, let subscriber else { return }
        let chunk = system.takeInput(upTo: ReadBuffer.size, by: system.now)
        if !chunk.isEmpty {
            system.noteInTrace(chunk, status: 0)
            subscriber.sendNext(chunk)
            scheduleRead()
        } else if let end = system.inputEndsAt, end <= system.now {
            system.noteInTrace([], status: UV_EOF.rawValue)
            self.subscriber = nil
            close()
            subscriber.sendCompleted()
        } else {
            scheduleRead()
        }
    }

    override func close() {
        arrivalTimer.take()?.dispose()
        if system.inputReader === self { system.inputReader = nil }
        closeSimulatedHandle()
    }
}

extension SimulatedSystem {
    // MARK: - standard input

    /// Adds `bytes` to standard input, arriving at `at` (virtual nanoseconds) after what is
    /// scripted for the same time; the refusal when standard input ends before `at`.
    package func scriptInput(_ bytes: [UInt8], at: UInt64) -> String? {
        if let end = inputEndsAt, end < at {
            return "standard input ends at \(end) ns, before these bytes at \(at) ns"
        }
        let index = pendingInput.firstIndex { $0.at > at } ?? pendingInput.endIndex
        pendingInput.insert((at, bytes), at: index)
        inputReader?.scheduleRead()
        return nil
    }

    /// Ends standard input at `at` (virtual nanoseconds); the refusal when it ends already or
    /// bytes are scripted after `at`.
    package func scriptEndOfInput(at: UInt64) -> String? {
        if let end = inputEndsAt { return "standard input already ends at \(end) ns" }
        if let last = pendingInput.last, last.at > at {
            return "bytes are scripted at \(last.at) ns, after the end at \(at) ns"
        }
        inputEndsAt = at
        inputReader?.scheduleRead()
        return nil
    }

    /// Whether a read at `now` finds bytes or the end.
    func inputArrived(by now: UInt64) -> Bool {
        if let first = pendingInput.first { return first.at <= now }
        return inputEndsAt.map { $0 <= now } ?? false
    }

    /// When the next scripted part arrives (or the end), if any is left.
    var nextInputArrival: UInt64? { pendingInput.first?.at ?? inputEndsAt }

    /// Takes up to `limit` bytes of what arrived by `now`, oldest first.
    func takeInput(upTo limit: Int, by now: UInt64) -> [UInt8] {
        var taken: [UInt8] = []
        while taken.count < limit, let first = pendingInput.first, first.at <= now {
            let room = limit - taken.count
            if first.bytes.count <= room {
                taken += first.bytes
                pendingInput.removeFirst()
            } else {
                taken += first.bytes[..<room]
                pendingInput[0].bytes.removeFirst(room)
            }
        }
        return taken
    }

    // MARK: - standard output and error

    /// `bytes` written to descriptor 1 or 2 on `loop` now: kept with the time, and traced; or,
    /// once its reader went away (`outputClosesAt`), refused with `EPIPE` (traced too).
    func capture(_ bytes: [UInt8], descriptor: Int32, on loop: EventLoop) -> UVError? {
        if let closed = outputClosesAt[descriptor], closed <= now {
            noteInTrace([], status: UV_EPIPE.rawValue)
            return UVError(code: UV_EPIPE.rawValue, message: "the simulation's reader of this output went away",
                           context: "write to \(descriptor == 1 ? "standard output" : "standard error") (simulated)")
        }
        captured[descriptor, default: []].append(CapturedWrite(at: now, loopName: loop.name, bytes: bytes))
        noteInTrace(bytes, status: descriptor)
        return nil
    }
}

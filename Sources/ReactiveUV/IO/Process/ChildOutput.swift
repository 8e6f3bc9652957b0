import Synchronization

extension RunningChild {
    /// `output` for a child whose standard output and error are `pipes[1]` and `pipes[2]` (nil: not a `.pipe`).
    static func mergedOutput(of session: ProcessSession, pipes: [ChildPipe?], child: String) -> Signal<ProcessOutput> {
        let stdio = session.request.stdio
        return Signal { subscriber in
            guard let standardOutput = pipes[1], let standardError = pipes[2] else {
                subscriber.sendError(notPipesError(stdio: stdio, child: child))
                return nil
            }
            return LoopBinding.open(on: session.loop, for: subscriber, what: "RunningChild.output") { loop in
                let merge = ChildOutputMerge(loop: loop, subscriber: subscriber)
                merge.start(reading: [standardOutput, standardError])
                return merge
            }
        }.debugNamed("+output(\(child))")
    }

    /// `EINVAL` naming the streams that are not pipes and how they were configured.
    private static func notPipesError(stdio: [ProcessStdio], child: String) -> UVError {
        let notPipes = [(1, "standardOutput"), (2, "standardError")].filter { stdio[$0.0] != .pipe }
        let names = notPipes.map { ChildPipe.Role($0.0).name }.joined(separator: " and ")
        let configured = notPipes.map { "\($0.1): \(stdio[$0.0].spawnArgument)" }.joined(separator: ", ")
        let verb = notPipes.count == 1 ? "is not a pipe" : "are not pipes"
        return UVError(code: UVError.invalidArgumentCode,
                       message: "the child's \(names) \(verb) (spawned with \(configured)): output merges the two pipes; "
                           + "spawn both with .pipe, or read the one pipe's bytes",
                       context: "RunningChild.output of \(child)")
    }
}

extension ProcessStdio {
    /// How the choice is written as a `spawn` argument: `.inherit`, `.descriptor(5)`.
    var spawnArgument: String {
        switch self {
        case .pipe: ".pipe"
        case .inherit: ".inherit"
        case .ignore: ".ignore"
        case .descriptor(let descriptor): ".descriptor(\(descriptor))"
        }
    }
}

/// The readings a process consumer holds, and the consumer's pause, which reaches every reading
/// that can pause (one added later too). A class: a reading's `dispose()` or `pause()` may call
/// back into its owner and reach this again (an exclusivity trap for a struct).
/// Thread rule: loop thread only (held by a loop-confined owner).
final class PausableReadings {
    private var readings: [any Disposable] = []
    private var controls: [FlowControl] = []
    private(set) var paused = false

    /// Holds `reading`; if its source can pause, the consumer's pause reaches it from now on.
    func add(_ reading: Subscription) {
        if let control = reading.flowControl {
            controls.append(control)
            if paused { control.pause() }
        }
        readings.append(reading)
    }

    /// Holds a reading that cannot be paused (a child's exit).
    func add(unpausable reading: any Disposable) {
        readings.append(reading)
    }

    func setPaused(_ paused: Bool) {
        self.paused = paused
        for control in controls {
            if paused { control.pause() } else { control.resume() }
        }
    }

    /// Disposes every reading, after forgetting them (a reading's end may call back into the owner).
    func disposeAll() {
        let readings = self.readings
        self.readings = []
        controls = []
        for reading in readings { reading.dispose() }
    }
}

/// One `RunningChild.output` subscription: both output pipes read into one stream of chunks, in
/// the order read. Completes once both reached EOF; the first error (a read error, `EBUSY` for a
/// pipe that already has a reader, shutdown) fails it and stops the other pipe.
final class ChildOutputMerge: LoopDisposable, @unchecked Sendable {
    // Sendable: loop thread only (`dispose()` and the readers' callbacks run there); `loop` is
    // immutable and `disposedFlag` atomic.
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private var subscriber: Subscriber<ProcessOutput>?
    private let readings = PausableReadings()
    /// Pipes that have not reached EOF yet.
    private var pipesOpen = 0

    init(loop: EventLoop, subscriber: Subscriber<ProcessOutput>) {
        self.loop = loop
        self.subscriber = subscriber
    }

    /// Starts reading `pipes` (standard output, then standard error). Loop thread only.
    func start(reading pipes: [ChildPipe]) {
        // Strong captures: the cycle ends when the subscription's teardown drops the flow control.
        subscriber?.setFlowControl(pause: { self.readings.setPaused(true) }, resume: { self.readings.setPaused(false) })
        pipesOpen = pipes.count
        for pipe in pipes {
            guard subscriber != nil else { return }  // the first pipe's reading failed at once (EBUSY)
            let isOutput = pipe.role == .standardOutput
            // Subscribed on its home loop thread, so the reader's flow control is registered at once.
            let reading = pipe.bytes.subscribeSink(
                next: { [self] chunk in subscriber?.sendNext(isOutput ? .standardOutput(chunk) : .standardError(chunk)) },
                error: { [self] error in finish(error) },
                completed: { [self] in pipeDidEnd() })
            guard subscriber != nil else {
                reading.dispose()  // it ended everything while subscribing
                return
            }
            readings.add(reading)
        }
    }

    private func pipeDidEnd() {
        pipesOpen -= 1
        if pipesOpen == 0 { finish(nil) }
    }

    private func finish(_ error: (any Error)?) {
        let subscriber = self.subscriber
        self.subscriber = nil
        release()
        subscriber?.sendEnd(failure: error)
    }

    private func release() {
        readings.disposeAll()
    }

    func abandon() {
        subscriber = nil
        release()
    }
}

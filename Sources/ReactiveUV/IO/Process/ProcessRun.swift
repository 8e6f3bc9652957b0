import Synchronization

/// One `ChildProcess.run` subscription: `spawn`, with `.started`, the child's `output` and `.exited` in one stream of `ProcessOutput`.
final class ProcessRun: LoopDisposable, @unchecked Sendable {
    // Sendable: loop thread only (`dispose()` and the flow-control closures run there); `disposedFlag` is atomic.
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private var subscriber: Subscriber<ProcessOutput>?
    private var spawning: (any Disposable)?
    /// The `output` and exit subscriptions; the consumer's pause goes to the `output` reading (on to both pipes).
    private let readings = PausableReadings()

    init(loop: EventLoop, subscriber: Subscriber<ProcessOutput>) {
        self.loop = loop
        self.subscriber = subscriber
    }

    func start(_ spawn: Signal<RunningChild>, input: [UInt8]?) {
        // Strong captures: the cycle ends when the subscription's teardown drops the flow control.
        subscriber?.setFlowControl(pause: { self.readings.setPaused(true) }, resume: { self.readings.setPaused(false) })
        let subscription = spawn.subscribe(
            next: { [self] child in started(child, input: input) },
            error: { [self] error in finish(error) },
            completed: { [self] in finish(nil) })
        if subscriber == nil {
            subscription.dispose()  // it ended (or was disposed) while subscribing
        } else {
            spawning = subscription
        }
    }

    private func started(_ child: RunningChild, input: [UInt8]?) {
        subscriber?.sendNext(.started(pid: child.pid))
        guard subscriber != nil else { return }
        // Its completion is not the end: `spawn` completes once the child also exited. Subscribed on its
        // home loop thread, so the merge's flow control is registered at once.
        let reading = child.output.subscribeSink(
            next: { [self] output in subscriber?.sendNext(output) },
            error: { [self] error in finish(error) }, completed: nil)
        guard subscriber != nil else {
            reading.dispose()
            return
        }
        readings.add(reading)
        readings.add(unpausable: child.exit.subscribeNext { [self] exit in subscriber?.sendNext(.exited(exit)) })
        if let input, let standardInput = child.standardInput {
            // A child that exits without reading it all ends the pipe with EPIPE: nothing more to do then.
            standardInput.send(input)
            standardInput.close()
        }
    }

    private func finish(_ error: (any Error)?) {
        let subscriber = self.subscriber
        self.subscriber = nil
        release()
        subscriber?.sendEnd(failure: error)
    }

    private func release() {
        readings.disposeAll()
        let spawning = self.spawning
        self.spawning = nil
        spawning?.dispose()
    }

    func abandon() {
        subscriber = nil
        release()
    }
}

/// The runtime the signal algebra (ReactiveUVCore) runs in: the shared loop as the home of
/// subscriptions made off every loop, and this library's errors. The algebra finds it by name.
final class LibUVRuntime: AlgebraRuntime {
    static var defaultScheduler: Scheduler { EventLoop.shared }

    static func invalidArgument(message: String, context: String) -> any Error {
        UVError(code: UVError.invalidArgumentCode, message: message, context: context)
    }

    static func shutDown(_ scheduler: String) -> any Error {
        EventLoopError.shutDown(loop: scheduler)
    }
}

extension EventLoop: LoopLifecycle {
    package var shutDownError: any Error { EventLoopError.shutDown(loop: name) }

    package var refusalError: any Error { refusal }

    package func enqueueDroppingIfShutDown(_ work: @escaping @Sendable () -> Void) -> Bool {
        enqueue(work)
    }

    package func addShutdownObserver(_ observer: @escaping @Sendable () -> Void) -> (any Disposable)? {
        shutdownObservers.add(observer)
    }

    package func afterRunningCallback() async {
        // Refused only when the loop has closed or is not being run: nothing is running there then.
        _ = try? await perform(operation: "disposeAndWait()") { _ in }
    }
}

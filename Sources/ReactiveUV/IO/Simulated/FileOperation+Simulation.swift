internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// A `FileOperation` on a simulated loop: each call is answered from the simulation's in-memory
/// tree (`SimulatedFileSystem`) as one callback of the loop, in place of its `uv_fs_*` request or
/// pool job, with the result a real file system gives.
extension FileOperation {
    /// Answers with what `answer` makes of the tree, as one callback of the loop: sends its value (if
    /// any), then completes; its error fails the operation. `context` labels the step.
    ///
    /// Thread rule: loop thread only.
    @inline(never)
    func simulate(_ context: String, _ answer: @escaping (SimulatedFileSystem) throws(UVError) -> Value?) {
        simulateAll(context) { files throws(UVError) in try answer(files).map { [$0] } ?? [] }
    }

    /// `simulate` for an answer of several values (a listing), sent in order.
    ///
    /// Thread rule: loop thread only.
    @inline(never)
    func simulateAll(_ context: String, _ answer: @escaping (SimulatedFileSystem) throws(UVError) -> [Value]) {
        simulateStep(context, answer) { [self] values in
            for value in values {
                guard isRunning else { return }
                send(value)
            }
            finish()
        }
    }

    /// One step answered from the tree as one callback of the loop: `then` gets the answer while the
    /// operation runs; the answer's error fails the operation.
    ///
    /// Thread rule: loop thread only.
    @inline(never)
    func simulateStep<Answer>(_ context: String, _ answer: @escaping (SimulatedFileSystem) throws(UVError) -> Answer,
                              then: @escaping (Answer) -> Void) {
        guard isRunning else { return }
        guard let files = loop.simulatedFiles else { return finish(loop.simulationRefusal("Files", what: context)) }
        guard loop.acceptsNewRequests else { return finish(EventLoopError.shutDown(loop: loop.name)) }
        stepContext = context
        // The simulation runs the callback on the thread that made it.
        let step = UncheckedSendable((answer, then))
        loop.execute { [self] in
            guard isRunning else { return }
            let answered: Answer
            do throws(UVError) {
                answered = try step.value.0(files)
            } catch {
                return finish(error)
            }
            step.value.1(answered)
        }
    }

    /// A one-request signal on a simulated loop (`single`): its call answered from the tree.
    @inline(never)
    func simulateSingle(_ signal: FileSystemSignal<Value>) {
        guard case .request(_, let sendsStat, let mode) = signal.source.work else { return }
        let context = signal.source.context
        simulate(context.description) { files throws(UVError) -> Value? in
            let info = try files.answer(context, mode: mode)
            // `Value` is `FileInfo` (a stat) or `Void`, as in `finishSingle`.
            if sendsStat, let info { return info as? Value }
            return () as? Value
        }
    }
}

extension SimulatedFileSystem {
    /// The answer to a one-request signal's call: the `FileInfo` of `stat`/`lstat`, nil for the others.
    func answer(_ call: FileCallContext, mode: UInt16) throws(UVError) -> FileInfo? {
        let context = call.description
        switch call.call.description {
        case "stat": return try stat(call.path, followLinks: true, context: context)
        case "lstat": return try stat(call.path, followLinks: false, context: context)
        case "access": try access(call.path, mode: Int32(mode), context: context)
        case "unlink": try unlink(call.path, context: context)
        case "rmdir": try removeDirectory(call.path, context: context)
        case "rename": try rename(call.path, to: call.other ?? "", context: context)
        case "symlink": try symbolicLink(at: call.path, target: call.other ?? "", context: context)
        case "chmod": try changeMode(call.path, to: UInt32(mode), context: context)
        default:
            throw UVError(code: UV_ENOTSUP.rawValue,
                          message: "the simulated file system has no \(call.call) yet", context: context)
        }
        return nil
    }
}

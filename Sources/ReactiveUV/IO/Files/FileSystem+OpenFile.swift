extension FileSystem {
    /// Opens the file at `path` (as ``Files/open(_:mode:options:permissions:on:)``), runs `body` with it in the caller's
    /// isolation, closes it (after its running operations end) and returns what `body` returned, or throws `body`'s
    /// error, the close's (`EIO`), or `CancellationError` when the task was cancelled before the file was open.
    /// Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withOpenFile<Result>(_ path: String, mode: OpenFile.Mode = .read, options: OpenFile.Options = [],
                                            permissions: UInt32 = 0o644, on loop: EventLoop? = nil,
                                            isolation: isolated (any Actor)? = #isolation,
                                            _ body: (OpenFile) async throws -> Result) async throws -> Result {
        try await withScopedFile(Files.open(path, mode: mode, options: options, permissions: permissions, on: self.loop(for: loop)),
                                 isolation: isolation, body)
    }

    /// Makes a temporary file (as ``Files/makeTemporaryFile(prefix:in:on:)``), runs `body` with it and closes it, as
    /// `withOpenFile` does; the file is not removed. Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withTemporaryFile<Result>(prefix: String = "reactiveuv-", in directory: String? = nil, on loop: EventLoop? = nil,
                                                 isolation: isolated (any Actor)? = #isolation,
                                                 _ body: (OpenFile) async throws -> Result) async throws -> Result {
        try await withScopedFile(Files.makeTemporaryFile(prefix: prefix, in: directory, on: self.loop(for: loop)),
                                 isolation: isolation, body)
    }
}

/// The scoped forms' body: the subscription owns the file while `body` runs.
func withScopedFile<Result>(_ opening: Signal<OpenFile>, isolation: isolated (any Actor)?,
                            _ body: (OpenFile) async throws -> Result) async throws -> Result {
    let ownership = ValuesChannel(signal: opening, policy: .default)
    // Cancelling the subscription closes the file if nothing else did (a cancelled task, a failed close).
    defer { ownership.cancel() }
    guard let file = try await ownership.next() else {
        // The signal sends its file or fails; it ends without one only when the task was cancelled.
        throw CancellationError()
    }
    let result: Result
    do {
        result = try await body(file)
    } catch {
        if !file.isClosed { _ = await closeAndWait(file, isolation: isolation) }
        throw error
    }
    if !file.isClosed, let closeError = await closeAndWait(file, isolation: isolation) { throw closeError }
    return result
}

/// Closes `file` and returns the close's error, or nil, waiting even in a cancelled task (the scoped forms promise a
/// closed file) unless operations on the pool hold the close: a cancelled task stops waiting then.
private func closeAndWait(_ file: OpenFile, isolation: isolated (any Actor)?) async -> (any Error)? {
    let wait = CloseWait()
    return await withTaskCancellationHandler {
        await withCheckedContinuation(isolation: isolation) { (continuation: CheckedContinuation<(any Error)?, Never>) in
            wait.setContinuation(continuation)
            do {
                try file.loop.tryExecute {
                    // Done here, at once, unless operations still run (`OpenFile.requestClose`).
                    file.requestClose(by: .close) { error in wait.finish(error) }
                    wait.requestReturned()
                }
            } catch {
                wait.finish(error)
            }
        }
    } onCancel: {
        wait.cancel()
    }
}

/// One `closeAndWait`: resumed once, by the close's end or by a cancellation while operations hold the close.
private final class CloseWait: @unchecked Sendable {
    // Everything is protected by `lock`; the continuation is resumed after unlocking.
    private let lock = SpinLock()
    @exclusivity(unchecked) private var continuation: CheckedContinuation<(any Error)?, Never>?
    /// What the continuation gets (once set, the wait is over).
    @exclusivity(unchecked) private var outcome: (any Error)??
    @exclusivity(unchecked) private var cancelled = false
    /// The close was asked for on the loop and waits for operations running on the pool.
    @exclusivity(unchecked) private var operationsRunning = false

    func setContinuation(_ continuation: CheckedContinuation<(any Error)?, Never>) {
        let ready: (any Error)?? = lock.withLock {
            if outcome == nil { self.continuation = continuation }
            return outcome
        }
        if let ready { continuation.resume(returning: ready) }
    }

    /// `requestClose` returned: if the close has not ended, operations on the pool hold it.
    func requestReturned() {
        let giveUp: Bool = lock.withLock {
            if outcome != nil { return false }
            operationsRunning = true
            return cancelled
        }
        if giveUp { finish(nil) }
    }

    func cancel() {
        let giveUp: Bool = lock.withLock {
            cancelled = true
            return operationsRunning
        }
        if giveUp { finish(nil) }
    }

    /// The wait is over: the close ended (loop thread, or the caller when the loop refused the work), or gave up.
    func finish(_ error: (any Error)?) {
        let taken: CheckedContinuation<(any Error)?, Never>? = lock.withLock {
            if outcome != nil { return nil }
            outcome = .some(error)
            let taken = continuation
            continuation = nil
            return taken
        }
        taken?.resume(returning: error)
    }
}

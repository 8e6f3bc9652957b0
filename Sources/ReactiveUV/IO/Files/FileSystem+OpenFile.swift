extension FileSystem {
    /// Opens the file at `path`, runs `body` with it, closes it, and returns what `body` returned.
    ///
    /// The scoped form of `Files.open` for async code: the file stays open for as long as
    /// `body` runs (`try await Files.open(...).first()` cannot do that: taking the first
    /// value ends the subscription, and the subscription owns the file).
    ///
    /// - When `body` returns, the file is closed (after its operations still running end)
    ///   and the close's error (`EIO`), if any, is thrown instead of the result.
    /// - When `body` throws, the file is closed and `body`'s error is rethrown.
    /// - Closing it inside `body` is fine.
    ///
    /// - Parameters: As `Files.open`'s; `loop` nil means the calling task's loop (`EventLoop.shared`
    ///   for a task that runs on no loop). `isolation`: the caller's, where `body` runs (leave the default).
    /// - Returns: What `body` returned.
    /// - Throws: `Files.open`'s errors, `body`'s error, the close's error, or `CancellationError`
    ///   (the task was cancelled before the file was open). Once `body` has run, what it returned is
    ///   returned (or its error rethrown) in a cancelled task too, after the close; a cancelled task
    ///   waits for the close only while no operation runs on the pool (one blocked on a device or a
    ///   FIFO holds a close for as long as it blocks; the file is then closed when it ends).
    ///
    /// Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withOpenFile<Result>(
        _ path: String,
        mode: OpenFile.Mode = .read,
        options: OpenFile.Options = [],
        permissions: UInt32 = 0o644,
        on loop: EventLoop? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (OpenFile) async throws -> Result
    ) async throws -> Result {
        try await withScopedFile(Files.open(path, mode: mode, options: options, permissions: permissions, on: self.loop(for: loop)),
                                 isolation: isolation, body)
    }

    /// Makes a temporary file (`Files.makeTemporaryFile`), runs `body` with it, closes it and returns what
    /// `body` returned. The file is not removed: its `path` names it.
    ///
    /// - Parameters: As `Files.makeTemporaryFile`'s, and `withOpenFile`'s `isolation` and `body`.
    /// - Returns: What `body` returned.
    /// - Throws: `mkstemp`'s errors, `body`'s error, the close's error, or `CancellationError` (as `withOpenFile`'s).
    ///
    /// Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withTemporaryFile<Result>(
        prefix: String = "reactiveuv-",
        in directory: String? = nil,
        on loop: EventLoop? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (OpenFile) async throws -> Result
    ) async throws -> Result {
        try await withScopedFile(Files.makeTemporaryFile(prefix: prefix, in: directory, on: self.loop(for: loop)),
                                 isolation: isolation, body)
    }
}

/// The scoped file of `withOpenFile` / `withTemporaryFile`: the subscription owns the file while `body` runs.
func withScopedFile<Result>(
    _ opening: Signal<OpenFile>,
    isolation: isolated (any Actor)?,
    _ body: (OpenFile) async throws -> Result
) async throws -> Result {
    let ownership = ValuesChannel(signal: opening, policy: .default)
    // Cancelling the subscription closes the file if nothing else did (a cancelled task, a failed close).
    defer { ownership.cancel() }
    guard let file = try await ownership.next(isolation: isolation) else {
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

/// Closes `file` and waits for the close to end, even in a task that is cancelled, unless it waits
/// for operations still running on the pool: the scoped forms promise a closed file when they
/// return, and `body`'s result once it has one.
///
/// (Awaited with `waitUntilCompleted()`, a task cancelled while `body` ran had the wait end at once
/// with `CancellationError`: `withOpenFile` threw it in place of what `body` returned, and returned
/// with the file often still open, its close's error unheard.) With no operation running the close
/// is done on the loop thread at once. An operation can hold it for ever (a read blocked on a
/// device, a write to a FIFO nobody reads): a cancelled task stops waiting then, and the file is
/// closed when the operation ends.
///
/// - Returns: The close's error (`EventLoopError.shutDown` from a loop that has shut down), or nil.
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

/// One `closeAndWait`: its continuation is resumed once, by the close's end or by a cancellation
/// that finds the close waiting for operations on the pool.
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

    /// The close ended (loop thread, or the caller when the loop refused the work).
    func finish(_ error: (any Error)?) { end(with: error) }

    /// `requestClose` returned: if the close has not ended, operations on the pool hold it.
    func requestReturned() {
        let giveUp: Bool = lock.withLock {
            if outcome != nil { return false }
            operationsRunning = true
            return cancelled
        }
        if giveUp { end(with: nil) }
    }

    func cancel() {
        let giveUp: Bool = lock.withLock {
            cancelled = true
            return operationsRunning
        }
        if giveUp { end(with: nil) }
    }

    private func end(with error: (any Error)?) {
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

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
    ///   (the task was cancelled before the file was open; once `body` has run, cancellation changes
    ///   nothing: the close is waited for and what `body` returned is returned).
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
    /// - Throws: `mkstemp`'s errors, `body`'s error, the close's error, or `CancellationError`.
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

/// Closes `file` and waits for the close to end, whether or not the task is cancelled: the scoped
/// forms promise a closed file when they return, and `body`'s result once it has one.
///
/// (Awaited with `waitUntilCompleted()`, a task cancelled while `body` ran had the wait end at once
/// with `CancellationError`: `withOpenFile` threw it in place of what `body` returned, and returned
/// with the file often still open, its close's error unheard.) A close always ends: it waits only
/// for the file's operations running on the pool, and fails with `EventLoopError.shutDown` on a
/// loop that has shut down.
///
/// - Returns: The close's error, or nil.
private func closeAndWait(_ file: OpenFile, isolation: isolated (any Actor)?) async -> (any Error)? {
    await withCheckedContinuation(isolation: isolation) { (continuation: CheckedContinuation<(any Error)?, Never>) in
        _ = file.close().subscribe(error: { continuation.resume(returning: $0) }, completed: { continuation.resume(returning: nil) })
    }
}

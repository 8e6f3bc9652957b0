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
    /// - Throws: `Files.open`'s errors, `body`'s error, the close's error, or `CancellationError`.
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
        if !file.isClosed { _ = await file.close().waitUntilCompleted() }
        throw error
    }
    if !file.isClosed, let closeError = await file.close().waitUntilCompleted() { throw closeError }
    return result
}

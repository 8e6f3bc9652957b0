extension UnixSocket {
    /// Connects to the Unix socket at `path`, runs `body` with the open connection, then
    /// closes it, and returns what `body` returned.
    ///
    /// The scoped form of `connect` for async code, with `TCP.withConnection`'s rules:
    /// when `body` returns, the connection is closed gracefully (what it queued is flushed,
    /// then EOF; a close that fails is thrown instead of the result); when `body` throws,
    /// the connection is reset before the error is rethrown; cancelling the task throws
    /// `CancellationError` and closes the connection at once.
    ///
    /// - Parameters:
    ///   - path: The socket's path, or `"\0name"` for a Linux abstract name.
    ///   - options: Buffer limits (and `ipc`) for the connection.
    ///   - loop: Where the socket lives; nil for the calling task's loop (`EventLoop.shared`
    ///     for a task that runs on no loop).
    ///   - isolation: The caller's isolation, where `body` runs (leave the default).
    ///   - body: Runs with the open connection, in the caller's isolation.
    /// - Returns: What `body` returned.
    /// - Throws: `connect`'s errors (`ECONNREFUSED` for a socket file nobody listens on,
    ///   `ENOENT`, `ENAMETOOLONG`...), `body`'s error, the graceful close's error, or
    ///   `CancellationError`.
    ///
    /// Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withConnection<Result>(
        path: String,
        options: UnixSocketOptions = UnixSocketOptions(),
        on loop: EventLoop? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (UnixConnection) async throws -> Result
    ) async throws -> Result {
        try await withScopedConnection(connect(path: path, options: options, on: loop), isolation: isolation, body)
    }
}

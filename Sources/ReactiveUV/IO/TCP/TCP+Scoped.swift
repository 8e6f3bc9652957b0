extension TCP {
    /// Connects to `host:port`, runs `body` with the open connection, then closes it, and returns what `body` returned.
    ///
    /// The scoped form of `connect` for async code: the connection stays open for as
    /// long as `body` runs (`try await TCP.connect(...).first()` cannot do that: taking
    /// the first value ends the subscription, and the subscription owns the connection).
    ///
    /// - When `body` returns, the connection is closed gracefully: the bytes it queued
    ///   are flushed, FIN is sent, the socket closes, and only then does `withConnection`
    ///   return (`isOpen` is false by then). If that close fails (the peer reset before
    ///   everything was flushed, or the connection had already failed), the error is
    ///   thrown instead of the result: the peer did not get everything. A peer that
    ///   never reads holds that close (and so `withConnection`) while bytes wait for it,
    ///   as it holds any `close()`: cancel the task, or `reset()` in `body`, to cut it short.
    /// - When `body` throws, the connection is reset (RST, what is still queued is
    ///   dropped) before the error is rethrown: a failed exchange must not look complete
    ///   to the peer, which a clean FIN after a partial answer would; and a peer that does
    ///   not read cannot hold the error back. The reset's own outcome is not reported.
    /// - Closing it inside `body` (`close()`, `reset()`) is fine; so is reading until EOF
    ///   and then answering.
    /// - Cancelling the task while connecting throws `CancellationError`; cancelling it
    ///   while the graceful close waits throws `CancellationError` and closes the
    ///   connection at once.
    ///
    /// - Parameters:
    ///   - host: A numeric address or a host name.
    ///   - port: 1...65535.
    ///   - options: Socket options and buffer limits for the connection.
    ///   - timeout: Give up connecting after this long (`ETIMEDOUT`); nil leaves it to the system.
    ///   - loop: Where the socket lives; nil for the calling task's loop (`EventLoop.shared`
    ///     for a task that runs on no loop).
    ///   - isolation: The caller's isolation, where `body` runs (leave the default).
    ///   - body: Runs with the open connection, in the caller's isolation.
    /// - Returns: What `body` returned.
    /// - Throws: `connect`'s errors (`UVError.connectionRefused`, `.nameNotFound`,
    ///   `ETIMEDOUT`, `EINVAL` for a port out of range...), `body`'s error, the graceful
    ///   close's error, or `CancellationError`.
    ///
    /// Thread rule: safe from any task; `body` runs in the caller's isolation.
    public static func withConnection<Result>(
        host: String,
        port: Int,
        options: TCPOptions = TCPOptions(),
        timeout: Duration? = nil,
        on loop: EventLoop? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (TCPConnection) async throws -> Result
    ) async throws -> Result {
        try await withScopedConnection(connect(host: host, port: port, options: options, timeout: timeout, on: loop),
                                       isolation: isolation, body)
    }
}

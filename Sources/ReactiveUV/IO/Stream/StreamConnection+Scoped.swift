/// The scoped connection of `TCP.withConnection` and `UnixSocket.withConnection`: one
/// subscription owns the connection while `body` runs; then a graceful close that is
/// awaited (its error thrown instead of the result), or a reset when `body` threw.
func withScopedConnection<Connection: StreamConnection, Result>(
    _ connecting: Signal<Connection>,
    isolation: isolated (any Actor)?,
    _ body: (Connection) async throws -> Result
) async throws -> Result {
    // The subscription owns the connection: it is kept (unlike `first()`'s) until the close is done.
    let ownership = ValuesChannel(signal: connecting, policy: .default)
    defer { ownership.cancel() }
    guard let connection = try await ownership.next() else {
        // The signal sends its connection or fails; it ends without one only when the task was cancelled.
        throw CancellationError()
    }
    let result: Result
    do {
        result = try await body(connection)
    } catch {
        connection.reset()
        // Queued after the reset on the connection's loop, so it completes once the socket is closed.
        _ = await connection.close().waitUntilCompleted()
        throw error
    }
    if let closeError = await connection.close().waitUntilCompleted() { throw closeError }
    return result
}

extension StreamConnection {
    /// Sends `text` as UTF-8 (no newline is added), as `send(_:)` sends bytes: nothing to subscribe to.
    ///
    /// - Parameter text: The text.
    ///
    /// Thread rule: safe from any thread.
    public final func send(_ text: String) {
        send(Array(text.utf8))
    }
}

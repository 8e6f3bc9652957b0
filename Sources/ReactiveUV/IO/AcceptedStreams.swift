internal import CLibUV

/// The connections a listening stream accepted: taking one from libuv, the connection
/// limit, and ending them all. One copy for every listener (TCP and Unix-domain sockets),
/// which differ only in how they listen and what they tell their subscriber.
///
/// Loop thread only; held (strongly) by its listener, and the accepted streams' owner.
final class AcceptedStreams: StreamHandleOwner {
    /// What `accept` did with a pending connection that libuv handed over.
    enum Outcome<Details> {
        /// Kept: the stream is open and owned here until it ends.
        case accepted(StreamHandle, Details)
        /// Turned away by the limit (already closed; reset when asked); `open` were open.
        case refused(Details, open: Int)
    }

    /// The most connections open at once (nil: no limit).
    private let maxConnections: Int?
    /// The open connections, until each ends (`streamDidEnd`) or `endAll`.
    private var streams: [ObjectIdentifier: StreamHandle] = [:]

    init(maxConnections: Int?) {
        self.maxConnections = maxConnections
    }

    /// Takes the connection libuv says is pending on `listener` into a stream `makeStream`
    /// builds, reads what the listener needs of it (`details`, run before the limit is
    /// applied, so a refusal can name the peer), then keeps it or turns it away.
    ///
    /// - Returns: What happened, or nil when there was nothing to take (the error concerns
    ///   that one connection; it is reported and the listener goes on, as libuv copes with
    ///   `EMFILE` itself).
    func accept<Details>(
        status: Int32,
        from listener: UnsafeMutablePointer<uv_stream_t>,
        place: String,
        resetRefused: Bool,
        makeStream: () -> StreamHandle,
        details: (StreamHandle) -> Details
    ) -> Outcome<Details>? {
        guard uvCheckReporting(status, "accepting a connection on \(place)") else { return nil }
        let stream = makeStream()
        do {
            try stream.open()
            try uvCheck(uv_accept(listener, stream.stream), "uv_accept")
        } catch {
            stream.end(.closed)
            reportMisuse("a connection could not be accepted on \(place): \(error)")
            return nil
        }
        let read = details(stream)
        if let limit = maxConnections, streams.count >= limit {
            // Accepted only to be turned away: a TCP reset tells the client at once and
            // leaves no TIME_WAIT state here.
            stream.end(.closed, reset: resetRefused)
            return .refused(read, open: streams.count)
        }
        stream.owner = self
        streams[ObjectIdentifier(stream)] = stream
        return .accepted(stream, read)
    }

    func streamDidEnd(_ stream: StreamHandle, reason: StreamHandle.EndReason) {
        streams[ObjectIdentifier(stream)] = nil
    }

    /// Ends every open connection (the listener is going away).
    func endAll(_ reason: StreamHandle.EndReason) {
        let open = streams.values
        streams.removeAll()
        for stream in open { stream.end(reason) }
    }
}

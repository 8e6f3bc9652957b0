/// One set of callbacks that reads any number of connections, with no object per connection: the
/// shared, callback form of `StreamConnection.bytes`, for a server that holds many connections.
///
/// Subscribing to `bytes` makes a subscription for each connection (two small objects, about 200
/// bytes with malloc's headers): an idle server with 100,000 clients holds 20 MB of them. A
/// `StreamReader` is made once and handed to every connection with `read(with:)`; a connection
/// it reads keeps only a reference to it. It is libuv's model (one read callback for every
/// stream) and NIO's sharable handler, in the vocabulary of a signal's observer:
///
/// ```swift
/// let echo = StreamReader(next: { connection, chunk in connection.send(chunk) })
/// TCPServer.serve(port: 7).subscribeNext { event in
///     if case .accepted(let connection) = event { connection.read(with: echo) }
/// }
/// ```
///
/// The callbacks are those of a `bytes` subscriber, with the connection they are about, and the
/// same rules hold: chunks of at most 64 KiB in order, one reader at a time (a second reader of
/// either kind is refused with `EBUSY`), `completed` at EOF or when the connection is closed
/// here, `error` when it breaks (`ECONNRESET`), when the loop shuts down
/// (`EventLoopError.shutDown`), or when the read cannot start. Write backpressure pauses reading
/// as it does for `bytes`, and the half-close rule applies: after `completed` returns, a
/// connection without `allowHalfOpen` closes itself once one more loop turn has passed. What it
/// does not have is a consumer's flow control (a reader that wants to pause calls
/// `stopReading()`, and `read(with:)` again to go on) or delivery to another loop: the callbacks
/// run on each connection's own loop thread, which is why they must be `Sendable` (a reader
/// shared by the connections of a loop group runs on several threads at once).
///
/// Thread rule: safe from any thread (immutable); the callbacks run on the loop thread of the
/// connection they are given.
public final class StreamReader: Sendable {
    let next: @Sendable (StreamConnection, [UInt8]) -> Void
    let error: @Sendable (StreamConnection, any Error) -> Void
    let completed: @Sendable (StreamConnection) -> Void

    /// Makes a reader from its callbacks.
    ///
    /// - Parameters:
    ///   - next: Given each chunk read, with its connection.
    ///   - error: Given the error that ended a connection's reading (by default, nothing is done:
    ///     the connection has already ended, or, for `EBUSY`, goes on with its other reader).
    ///   - completed: Told that a connection's reading ended without error: EOF, or a close here.
    ///
    /// Thread rule: safe from any thread.
    public init(
        next: @escaping @Sendable (StreamConnection, [UInt8]) -> Void,
        error: @escaping @Sendable (StreamConnection, any Error) -> Void = { _, _ in },
        completed: @escaping @Sendable (StreamConnection) -> Void = { _ in }
    ) {
        self.next = next
        self.error = error
        self.completed = completed
    }
}

/// Who reads a stream: a `bytes` subscriber (`HomeGate`: its gate, or its sink on the stream's
/// loop), or, as the one specialisation, a `StreamReader` shared by many streams, which is called
/// on the stream's loop thread with the connection it reads.
///
/// Thread rule: loop thread only (the stream's `readers` slot).
enum StreamReaderTarget: SlotReader {
    case gate(HomeGate<[UInt8]>)
    case shared(StreamReader)

    /// A subscriber's disposal stops it; a shared reader has no subscription (`stopReading()` stops it).
    var isDisposed: Bool {
        switch self {
        case .gate(let gate): gate.isDisposed
        case .shared: false
        }
    }

    /// The subscription a gate sends to; nil for a shared reader.
    var subscription: Subscription? {
        switch self {
        case .gate(let gate): gate.subscription
        case .shared: nil
        }
    }

    /// The flow control a subscriber's source registered, if any (a shared reader has none).
    var registeredFlowControl: FlowControl? {
        switch self {
        case .gate(let gate): gate.registeredFlowControl
        case .shared: nil
        }
    }

    /// Sends a chunk `connection` read, on its loop thread: `home` says the reader's home is that loop.
    /// Inlined into the read callback, the hot path of every read.
    @inline(__always)
    func deliver(_ chunk: [UInt8], from connection: StreamConnection, home: Bool) {
        switch self {
        case .gate(let gate):
            if home { gate.deliverNext(chunk) } else { gate.sendNext(chunk) }
        case .shared(let reader):
            reader.next(connection, chunk)
        }
    }

    /// Tells the reader `connection`'s reading ended without error.
    func sendCompleted(from connection: StreamConnection) {
        switch self {
        case .gate(let gate): gate.sendCompleted()
        case .shared(let reader): reader.completed(connection)
        }
    }

    /// Tells the reader `connection`'s reading ended with `error`.
    func sendError(_ error: any Error, from connection: StreamConnection) {
        switch self {
        case .gate(let gate): gate.sendError(error)
        case .shared(let reader): reader.error(connection, error)
        }
    }
}

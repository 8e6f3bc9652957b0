// The `echo-async` sample's server: `for try await` over the server's events and each connection's
// bytes, one task per client on its connection's loop. Shared by the executable and the tests
// (which run it on a simulated group).
import ReactiveUV
import SampleSupport
import Synchronization

/// How many clients are connected: counted by the tasks of every loop.
///
/// Thread rule: safe from any thread.
public final class OpenCount: Sendable {
    private let count = Atomic<Int>(0)

    /// No client yet. Thread rule: safe from any thread.
    public init() {}

    /// One more; returns the new count. Thread rule: safe from any thread.
    public func opened() -> Int { count.wrappingAdd(1, ordering: .relaxed).newValue }
    /// One fewer; returns the new count. Thread rule: safe from any thread.
    public func closed() -> Int { count.wrappingSubtract(1, ordering: .relaxed).newValue }
    /// The count now. Thread rule: safe from any thread.
    public var current: Int { count.load(ordering: .relaxed) }
}

/// What either server (TCP or Unix socket) sends, as the sample prints it.
///
/// Thread rule: a value type; safe from any thread.
public enum ServerEvent: Sendable {
    /// Listening on this place.
    case listening(String)
    /// A client came.
    case accepted(StreamConnection, peer: String)
    /// A client was turned away at the connection limit.
    case refused(peer: String, open: Int)
    /// The drain began with this many clients connected.
    case draining(open: Int)
}

/// The echo-async server's two parts: the server's events, and the serving of them.
///
/// Thread rule: a namespace; see each function.
public enum EchoAsyncServer {
    /// The TCP or Unix-socket server on `group`, following `drain`.
    ///
    /// Thread rule: safe from any thread.
    public static func events(_ options: EchoServerOptions, on group: EventLoopGroup,
                              drain: Signal<TCPServer.DrainRequest>) -> Signal<ServerEvent> {
        if let path = options.unixPath {
            let socketOptions = UnixSocketOptions(maxConnections: options.maxConnections, removeStaleSocketFile: true)
            return UnixSocket.serve(path: path, backlog: options.backlog, options: socketOptions, on: group, drain: drain).map { event in
                switch event {
                case .listening(let path): .listening("unix \(path)")
                case .accepted(let connection): .accepted(connection, peer: "on \(path)")
                case .refused(let open): .refused(peer: "on \(path)", open: open)
                case .draining(let open): .draining(open: open)
                }
            }
        }
        let tcpOptions = TCPOptions(maxConnections: options.maxConnections)
        return TCPServer.serve(host: options.host, port: options.port ?? 0, backlog: options.backlog, options: tcpOptions,
                               on: group, drain: drain).map { event in
            switch event {
            case .listening(let address): .listening("\(address)")
            case .accepted(let connection): .accepted(connection, peer: describe(connection.peerAddress))
            case .refused(let peer, let open): .refused(peer: describe(peer), open: open)
            case .draining(let open): .draining(open: open)
            }
        }
    }

    /// Serves until the server completes (a drain finished) or fails: one child task per connection,
    /// on the connection's own loop, each echoing its bytes; `log` is told each line the sample prints.
    ///
    /// Thread rule: call from a task on a loop (the server's events are read there); `log` is called
    /// from the tasks of every loop.
    public static func serve(_ options: EchoServerOptions, on group: EventLoopGroup, drain: Signal<TCPServer.DrainRequest>,
                             open: OpenCount, log: @escaping @Sendable (String) -> Void) async throws {
        try await withThrowingDiscardingTaskGroup { clients in
            for try await event in events(options, on: group, drain: drain).values(bufferingPolicy: .unbounded) {
                switch event {
                case .listening(let place):
                    log("echo-async: listening on \(place)")
                    log("echo-async: serving on \(group.loops.count) loop(s)")
                case .refused(let peer, let open):
                    log("client \(peer) refused: \(open) connections open, the limit")
                case .draining(let open):
                    log("echo-async: no longer accepting; waiting for \(open) connection(s) to close")
                case .accepted(let connection, let peer):
                    let count = open.opened()
                    log("client \(peer) connected (\(count) open)")
                    // On the connection's loop: its bytes are read there and the echo written there.
                    clients.addTask(executorPreference: connection.loop) {
                        var echoed = 0
                        var failure: (any Error)?
                        do {
                            // A full buffer pauses the socket (and a long write queue pauses it too).
                            for try await chunk in connection.bytes.values {
                                connection.send(chunk)
                                echoed += chunk.count
                            }
                        } catch {
                            failure = error
                        }
                        // The client half-closed, went away, or the drain's deadline reset it: close()
                        // sends what is still queued, then FIN (at once when the connection has ended).
                        if let error = await connection.close().waitUntilCompleted(), !(error is CancellationError) {
                            failure = failure ?? error
                        }
                        let count = open.closed()
                        let how = failure.map { "dropped (\($0))" } ?? "left"
                        log("client \(peer) \(how) after \(echoed) bytes (\(count) open)")
                    }
                }
            }
        }
    }
}

/// The socket calls behind a server: what one transport supplies to the listener (`Listener`) and
/// the group server (`GroupServer`), which hold the rest (accepting, the connection limit, refusal,
/// drain, idle timeout, serving on a group).
///
/// This is the server family's one seam to a backend. `TCPListeningSocket` and `UnixListeningSocket`
/// implement it on libuv; a second backend (a simulated network) implements it once per transport,
/// and the server signals (`TCPServer`, `UnixSocket`) pick the implementation where they make the
/// socket, so no call branches on the backend. What a transport decides stays behind it: how it
/// binds (an address, a path and its lock file), how a group shares the clients (a socket per loop
/// with `SO_REUSEPORT`, or one loop accepting and handing them to the others), what a refusal
/// tells, and how a connection's idle time is measured.
///
/// An implementation tells its `listener` what happened: a pending client (`acceptPending()`), that
/// it listens (`tell(.listening(...))`), an error (`fail(_:)`), its loop's shutdown (`loopDidShutDown()`).
/// For a group it also supplies the start that makes and starts the shares (`startShares(of:...)`,
/// handed to `ServerSignal.onGroup`), since binding for a group is the transport's choice.
///
/// Thread rule: instance members run on the socket's loop thread, except the immutable `accepts`
/// (read by the group server from any thread); static members are safe from any thread.
protocol ListeningSocket: AnyObject, SendableMetatype {
    /// What the server signal sends (`TCPServer.Event`, `UnixSocket.Event`).
    associatedtype Event: ServerEvent
    /// What the server was given (`TCPOptions`, `UnixSocketOptions`).
    associatedtype Options: ServerOptions

    /// Added to the idle timeout before a connection counts as idle: how early `idleMilliseconds` may err.
    static var idleMarginMilliseconds: UInt64 { get }
    /// How long `connection` moved no byte, in milliseconds; nil when that cannot be read (it is kept).
    static func idleMilliseconds(of connection: StreamConnection) -> UInt64?
    /// The refusal of options only this transport checks (TCP's keep-alive delay), or nil.
    static func transportRefusal(of options: Options, context: String) -> UVError?

    /// The loop the socket lives on.
    var loop: EventLoop { get }
    /// The listener this socket serves (held weakly: the listener owns the socket).
    var listener: Listener<Self>? { get set }
    /// The options the server was given.
    var options: Options { get }
    /// The kernel's queue of clients not yet accepted.
    var backlog: ListenBacklog { get }
    /// What made the listener, for labels ("TCPServer.listen", with the loop for a group's share).
    var origin: String { get }
    /// What refusals name ("TCPServer.listen", "UnixSocket.serve(/run/app.sock)").
    var context: String { get }
    /// Where it listens, for messages: the bound address or path, or what was asked for.
    var place: String { get }
    /// Whether this share takes clients from a socket (false for a Unix group's share that only homes
    /// the connections handed to it). Immutable.
    var accepts: Bool { get }

    /// Binds (or adopts) the socket and listens; nothing for a share that does not accept.
    func start()
    /// Takes the pending client into a new open connection, its options applied.
    func accept() throws(UVError) -> Event.Connection
    /// Stops accepting for good: closes the socket and what goes with it (a Unix socket's file), or
    /// what it was to adopt. Idempotent; the listener and its connections stay.
    func close()
}

/// A server event as the listener and the group server need to know it.
///
/// Thread rule: a value type; safe from any thread.
protocol ServerEvent: Sendable {
    /// The connection type the server accepts (`TCPConnection`, `UnixConnection`).
    associatedtype Connection: StreamConnection
    /// A client was accepted.
    static func accepted(_ connection: Connection) -> Self
    /// A drain began with `open` connections still open.
    static func draining(open: Int) -> Self
    /// The connection of an `.accepted` event; nil for every other event.
    var acceptedConnection: Connection? { get }
    /// Turns away a connection accepted past the limit (`open` were open): ends it as the transport
    /// does (TCP with a reset), and says so.
    static func refusing(_ connection: Connection, open: Int) -> Self
}

extension ListeningSocket {
    /// Turns away a connection accepted past the limit: the transport's `ServerEvent.refusing`.
    func refuse(_ connection: Event.Connection, open: Int) -> Event {
        Event.refusing(connection, open: open)
    }
}

extension ServerEvent {
    /// What `listen` sends of an event: the connection of each `.accepted`, nothing else.
    static func sendConnection(_ event: Self, to subscriber: Subscriber<Connection>) {
        if let connection = event.acceptedConnection { subscriber.sendNext(connection) }
    }

    /// What `serve` sends of an event: all of it.
    static func sendEvent(_ event: Self, to subscriber: Subscriber<Self>) {
        subscriber.sendNext(event)
    }
}

/// What a server's options hold in common, whatever the transport.
///
/// Thread rule: a value type; safe from any thread.
protocol ServerOptions: Sendable {
    /// The options every stream socket has (`TCPOptions`, `UnixSocketOptions` keep theirs here).
    var common: StreamSocketOptions { get }
}

/// The options TCP and Unix-domain sockets share; each public options type keeps them here and
/// offers them as its own properties.
///
/// Thread rule: a value type; safe from any thread.
struct StreamSocketOptions: Sendable, Hashable {
    /// Write-buffer limits as given (`limits` adds the half-open flag).
    var bufferLimits: StreamBufferLimits
    /// Keep a connection writable after the peer's EOF until `close()`.
    var allowHalfOpen: Bool
    /// For a server: the most connections open at once (nil: no limit).
    var maxConnections: Int?
    /// For a server: how long a connection may move no bytes before it is closed (nil: never).
    var idleTimeout: Duration?

    /// The limits each connection gets: `bufferLimits` with the half-open flag.
    var limits: StreamBufferLimits {
        var limits = bufferLimits
        limits.allowsHalfOpen = allowHalfOpen
        return limits
    }
}

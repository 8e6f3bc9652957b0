#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Options for a Unix-domain socket server or client (`UnixSocket`).
///
/// Thread rule: a value type; safe from any thread.
public struct UnixSocketOptions: Sendable, Hashable {
    /// How much unflushed written data each connection holds (see `StreamBufferLimits`).
    ///
    /// Thread rule: safe from any thread.
    public var limits: StreamBufferLimits { get { common.limits } set { common.bufferLimits = newValue } }
    /// Keep a connection open for writing after the peer's EOF until `close()` (Node's `allowHalfOpen`); default false.
    ///
    /// By default a connection whose peer half-closed closes itself once the
    /// application has had its turn with the EOF and what it queued is flushed
    /// (see `StreamConnection`, "Half-close"). Set it for a protocol that answers
    /// after the peer's EOF, later than that.
    ///
    /// Thread rule: safe from any thread.
    public var allowHalfOpen: Bool { get { common.allowHalfOpen } set { common.allowHalfOpen = newValue } }
    /// For a server: the most connections it keeps open at once, or nil for no limit (the default).
    ///
    /// A connection arriving at the limit is accepted and closed at once (the
    /// client reads EOF), and `UnixSocket.serve` reports it as `.refused`. At least
    /// 1 (a server given less fails with `EINVAL` before anything is bound). A
    /// client's options ignore it.
    ///
    /// Thread rule: safe from any thread.
    public var maxConnections: Int? { get { common.maxConnections } set { common.maxConnections = newValue } }
    /// For a server: close a connection after this long with no bytes moving over it, or nil (the default) for never.
    ///
    /// Activity is a byte crossing the socket either way: data read from the peer or still unread
    /// in the kernel, or data the kernel took to send (a connection whose writes wait on a peer that
    /// does not read, and which receives nothing, is idle). The kernel keeps no such record for a
    /// Unix socket, so the connections of such a server stamp the loop's time when bytes move. One
    /// timer per loop checks every quarter of the timeout, so a connection closes between the
    /// timeout and about 1.25 times it after its last byte (or its accept): its `bytes` fails with
    /// `ETIMEDOUT` naming the idle time, and its queued writes are dropped. Must be positive (else
    /// the server fails with `EINVAL`). A client's options ignore it.
    ///
    /// Thread rule: safe from any thread.
    public var idleTimeout: Duration? { get { common.idleTimeout } set { common.idleTimeout = newValue } }
    /// For a server on a file path: remove a socket file found at the path if nobody listens on it.
    ///
    /// A server that ended without disposing its listener (a crash, `kill
    /// -9`) leaves its socket file behind, and binding the path again fails
    /// with `EADDRINUSE`. With this option the server first tries to connect
    /// to the file: if that is refused (nobody listens), it removes the file
    /// and binds again. A file that is not a socket, or a socket a server
    /// listens on, is never removed (the bind fails with `EADDRINUSE`). Off by
    /// default; abstract names have no file and ignore it.
    ///
    /// Thread rule: safe from any thread.
    public var removeStaleSocketFile: Bool
    /// For a server on a file path: the socket file's mode (`0o660`: owner and group may connect), or nil to keep the one `umask` gives.
    ///
    /// Set after `bind` and before `listen`, so no client connects before it
    /// applies. Connecting needs write permission on the file. An abstract
    /// name has no file: asking for permissions there fails with `EINVAL`, as
    /// does a mode with bits beyond 0o7777 (`chmod` would drop them).
    ///
    /// Thread rule: safe from any thread.
    public var permissions: mode_t?
    /// Open connections for descriptor passing (`uv_pipe_init` with `ipc`): `UnixConnection.send(_:with:keepOpen:)` and `incoming`.
    ///
    /// Both ends must set it (a server: for the connections it accepts). An
    /// IPC connection reads with `recvmsg`, so it can take the descriptors the
    /// peer passes; read it with `incoming`, which delivers them (`bytes` ends
    /// with `EPROTO` when one arrives). Off by default.
    public var ipc: Bool

    /// Creates options.
    ///
    /// - Parameters:
    ///   - limits: Write-buffer limits (default `StreamBufferLimits()`).
    ///   - maxConnections: For a server, the most connections open at once (nil: no limit).
    ///   - removeStaleSocketFile: For a server, remove a socket file nobody listens on before binding (default false).
    ///   - permissions: For a server, the socket file's mode (nil: leave it to `umask`).
    ///   - ipc: Open the connections for descriptor passing (default false).
    ///   - allowHalfOpen: Keep a connection writable after the peer's EOF until `close()` (default false).
    ///   - idleTimeout: For a server, how long a connection may move no bytes before it is closed (nil: never).
    /// - Returns: The options.
    ///
    /// Thread rule: safe from any thread.
    public init(limits: StreamBufferLimits = StreamBufferLimits(), maxConnections: Int? = nil,
                removeStaleSocketFile: Bool = false, permissions: mode_t? = nil, ipc: Bool = false,
                allowHalfOpen: Bool = false, idleTimeout: Duration? = nil) {
        common = StreamSocketOptions(bufferLimits: limits, allowHalfOpen: allowHalfOpen, maxConnections: maxConnections,
                                     idleTimeout: idleTimeout)
        self.removeStaleSocketFile = removeStaleSocketFile
        self.permissions = permissions
        self.ipc = ipc
    }

    /// What Unix-domain sockets share with TCP's options, read by the server (`ServerOptions`).
    var common: StreamSocketOptions
}

extension UnixSocketOptions: ServerOptions {}

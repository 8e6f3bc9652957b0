/// The options both echo samples (`echo`, `echo-async`) take: where to listen, how many loops
/// serve, how many clients at once, how many may wait to be accepted, how long a drain waits; plus
/// any flags a sample adds.
///
/// Thread rule: a value type; safe from any thread.
public struct EchoServerOptions: Sendable {
    /// The address to listen on.
    public var host = "127.0.0.1"
    /// The TCP port (exactly one of `port` and `unixPath` is set).
    public var port: Int?
    /// The Unix-domain socket's path.
    public var unixPath: String?
    /// Clients beyond this many at once are turned away; nil: no limit.
    public var maxConnections: Int?
    /// How many loops serve the clients; nil: one per core.
    public var loops: Int?
    /// The listening socket's queue of clients not yet accepted; nil: the system's maximum (`net.core.somaxconn`).
    public var backlog: Int32?
    /// How long the first Ctrl-C's drain waits for the clients to leave.
    public var drainTimeout = Duration.seconds(10)
    /// The TLS certificate chain file (`--tls-cert`; with `--tls-key`, or neither), for a sample that serves TLS.
    public var tlsCertificate: String?
    /// The key of `tlsCertificate` (`--tls-key`).
    public var tlsKey: String?
    /// The sample's own flags that were given (of those `parse` was told about).
    public var flags: Set<String> = []

    /// Where the server listens, for messages: the socket path, or `host:port`.
    ///
    /// Thread rule: safe from any thread.
    public var place: String { unixPath ?? "\(host):\(port ?? 0)" }

    /// Reads the options from `arguments` (without the program name).
    ///
    /// - Parameters:
    ///   - arguments: The arguments.
    ///   - flags: Flags without a value the sample takes besides the shared options (`--verbose`).
    ///   - takesTLS: Whether `--tls-cert FILE` and `--tls-key FILE` are taken (the `echo` sample).
    /// - Returns: The options.
    /// - Throws: `UsageError` for an unknown argument, a bad value, neither or both of `--port` and
    ///   `--unix`, or one of `--tls-cert` and `--tls-key` without the other.
    ///
    /// Thread rule: safe from any thread.
    public static func parse(_ arguments: [String], flags known: Set<String> = [], takesTLS: Bool = false) throws -> EchoServerOptions {
        var options = EchoServerOptions()
        var reader = ArgumentReader(arguments)
        while let argument = try reader.next() {
            switch argument {
            case "--port":
                options.port = try reader.port(for: argument)
            case "--host":
                options.host = try reader.value(for: argument)
            case "--unix":
                options.unixPath = try reader.value(for: argument)
            case "--max-connections":
                options.maxConnections = try reader.count(for: argument, in: 1...Int.max)
            case "--loops":
                options.loops = try reader.count(for: argument, in: 1...1024)
            case "--backlog":
                options.backlog = Int32(try reader.count(for: argument, in: 1...Int(Int32.max)))
            case "--drain-timeout":
                options.drainTimeout = try reader.seconds(for: argument)
            case "--tls-cert" where takesTLS:
                options.tlsCertificate = try reader.value(for: argument)
            case "--tls-key" where takesTLS:
                options.tlsKey = try reader.value(for: argument)
            case _ where known.contains(argument):
                options.flags.insert(argument)
            default:
                throw UsageError("unknown argument '\(argument)'")
            }
        }
        guard (options.port == nil) != (options.unixPath == nil) else {
            throw UsageError(options.port == nil ? "--port or --unix is required" : "--port and --unix do not go together")
        }
        guard (options.tlsCertificate == nil) == (options.tlsKey == nil) else {
            throw UsageError("--tls-cert and --tls-key go together")
        }
        return options
    }
}

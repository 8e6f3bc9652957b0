// echo-async: the echo server written with async/await: `for try await` over the
// server's events and each connection's bytes, one task per client. The clients are
// served on a group's loops (each task runs on its connection's loop, its executor);
// the server's events are read on a loop of their own. The first Ctrl-C drains (no new
// clients; the connected ones are served until they leave, at most --drain-timeout), the
// second forces; then it exits 0.
//
//   echo-async --port 7000 [--host 127.0.0.1] [--max-connections N] [--backlog N] [--loops N] [--drain-timeout 10]
//   echo-async --unix /tmp/echo.sock [--max-connections N] [--backlog N] [--loops N] [--drain-timeout 10]
import ReactiveUV
import SampleSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: echo-async --port N [--host ADDRESS] [--max-connections N] [--backlog N] [--loops N] [--drain-timeout SECONDS]
           echo-async --unix PATH [--max-connections N] [--backlog N] [--loops N] [--drain-timeout SECONDS]
      --port N              the TCP port to listen on; 0 picks a free one (printed)
      --host ADDRESS        the address to listen on (default 127.0.0.1)
      --unix PATH           serve a Unix-domain socket at PATH instead (a socket file left by an
                            earlier run that nobody listens on is replaced; removed when the
                            drain begins or on exit)
      --loops N             serve the clients on N loops, each on its own thread (default: one
                            per core)
      --drain-timeout S     on the first Ctrl-C (or SIGTERM) stop accepting and wait up to S seconds
                            (default 10) for the connected clients to leave, then reset the rest;
                            a second Ctrl-C resets them at once
      --max-connections N   turn away clients beyond N connected at once (default: no limit)
      --backlog N           let N clients wait to be accepted (default: the system's maximum,
                            net.core.somaxconn; a Unix socket refuses a client at once when full)
    """

/// How many clients are connected: counted by the tasks of every loop.
final class OpenCount: Sendable {
    private let count = Atomic<Int>(0)

    /// One more; returns the new count.
    func opened() -> Int { count.wrappingAdd(1, ordering: .relaxed).newValue }
    /// One fewer; returns the new count.
    func closed() -> Int { count.wrappingSubtract(1, ordering: .relaxed).newValue }
    var current: Int { count.load(ordering: .relaxed) }
}

/// What either server sends, as this sample prints it.
enum ServerEvent: Sendable {
    case listening(String)
    case accepted(StreamConnection, peer: String)
    case refused(peer: String, open: Int)
    case draining(open: Int)
}

/// The TCP or Unix-socket server on `group`, following `drain`.
func server(_ options: EchoServerOptions, on group: EventLoopGroup, drain: Signal<TCPServer.DrainRequest>) -> Signal<ServerEvent> {
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
/// on the connection's own loop, each echoing its bytes.
func serve(_ options: EchoServerOptions, on group: EventLoopGroup, drain: Signal<TCPServer.DrainRequest>,
           open: OpenCount) async throws {
    try await withThrowingDiscardingTaskGroup { clients in
        for try await event in server(options, on: group, drain: drain).values(bufferingPolicy: .unbounded) {
            switch event {
            case .listening(let place):
                printLine("echo-async: listening on \(place)")
                printLine("echo-async: serving on \(group.loops.count) loop(s)")
            case .refused(let peer, let open):
                printLine("client \(peer) refused: \(open) connections open, the limit")
            case .draining(let open):
                printLine("echo-async: no longer accepting; waiting for \(open) connection(s) to close")
            case .accepted(let connection, let peer):
                let count = open.opened()
                printLine("client \(peer) connected (\(count) open)")
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
                    printLine("client \(peer) \(how) after \(echoed) bytes (\(count) open)")
                }
            }
        }
    }
}

@main
struct EchoAsync {
    static func main() async {
        let options = parseCommandLine(program: "echo-async", usage: usage) { try EchoServerOptions.parse($0) }
        // Everything the run made (the drain subject, the loops) is released before the exit, as
        // `echo`'s `exit(main())` does: a leak checker (the sanitizer test runs) then sees nothing alive.
        exit(await run(options))
    }

    /// Serves until drained; the exit status.
    static func run(_ options: EchoServerOptions) async -> Int32 {
        let loop = EventLoop(name: "echo-async")
        let group = EventLoopGroup(loopCount: options.loops ?? max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))), name: "echo-async")
        // The first interruption asks the server to drain, the second to force.
        let drainRequests = Subject<TCPServer.DrainRequest>()
        let open = OpenCount()
        var status: Int32 = 0
        await withTaskGroup(of: Int32?.self) { tasks in
            tasks.addTask(executorPreference: loop) {
                do {
                    try await serve(options, on: group, drain: drainRequests, open: open)
                    printLine("echo-async: drained")
                    return 0
                } catch {
                    printError("echo-async: cannot serve on \(options.place): \(error)")
                    return 1
                }
            }
            tasks.addTask(executorPreference: loop) {
                do {
                    var count = 0
                    for try await number in interruptions(on: loop).values {
                        count += 1
                        let connections = open.current
                        if count == 1 {
                            printLine("interrupted by \(signalName(number)): draining \(connections) connection(s) for up to \(options.drainTimeout) (again to force)")
                            drainRequests.sendNext(.graceful(timeout: options.drainTimeout))
                        } else {
                            printLine("interrupted by \(signalName(number)) again: resetting \(connections) connection(s)")
                            drainRequests.sendNext(.force)
                        }
                    }
                } catch {
                    printError("echo-async: cannot watch for Ctrl-C: \(error)")
                    return 1
                }
                return nil
            }
            // The server's end decides: drained (0) or failed (1); a failure to watch Ctrl-C ends it too.
            while let next = await tasks.next() {
                guard let result = next else { continue }
                status = result
                break
            }
            tasks.cancelAll()
        }
        _ = try? await loop.shutdownGracefully()
        // Every connection has closed by now (the drain waited for them, or the server's failure closed them).
        group.shutdown()
        return status
    }
}

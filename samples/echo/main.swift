// echo: a TCP (or Unix-socket) echo server. Prints when clients come and go. The first Ctrl-C
// drains (no new clients; the idle ones, whose bytes were all echoed, are closed at once; the
// others are served until they are idle or leave, at most --drain-timeout), the second forces;
// then it exits 0.
//
//   echo --port 7000 [--host 127.0.0.1] [--max-connections 1000] [--backlog N] [--loops N] [--drain-timeout 10] [--verbose]
//   echo --unix /tmp/echo.sock [--max-connections 1000] [--backlog N] [--loops N] [--drain-timeout 10] [--verbose]
//   either with --tls-cert FILE --tls-key FILE to serve TLS
import EchoServerKit
import ReactiveUV
import SampleSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: echo --port N [--host ADDRESS] [--max-connections N] [--backlog N] [--loops N] [--drain-timeout SECONDS] [--verbose]
                [--tls-cert FILE --tls-key FILE]
           echo --unix PATH [--max-connections N] [--backlog N] [--loops N] [--drain-timeout SECONDS] [--verbose]
                [--tls-cert FILE --tls-key FILE]
      --port N              the TCP port to listen on; 0 picks a free one (printed)
      --host ADDRESS        the address to listen on (default 127.0.0.1)
      --loops N             serve the clients on N loops, each on its own thread (default: one
                            per core); for TCP the kernel spreads the clients over them, for a
                            Unix socket the first loop accepts and hands them out in turn
      --drain-timeout S     on the first Ctrl-C (or SIGTERM) stop accepting, close the idle clients
                            (all they sent was echoed) and wait up to S seconds (default 10) for
                            the others to finish, then reset the rest; a second Ctrl-C resets them
                            at once
      --verbose             print which loop serves each client
      --unix PATH           serve a Unix-domain socket at PATH instead (a socket file left
                            by an earlier run that nobody listens on is replaced; removed when
                            the drain begins or on exit)
      --max-connections N   reset clients beyond N connected at once (default: no limit)
      --backlog N           let N clients wait to be accepted (default: the system's maximum,
                            net.core.somaxconn; a Unix socket refuses a client at once when full)
      --tls-cert FILE       serve TLS 1.2/1.3 with this PEM certificate chain (with --tls-key)
      --tls-key FILE        the certificate's PEM private key
    """

func main() -> Int32 {
    let options = parseCommandLine(program: "echo", usage: usage) { try EchoServerOptions.parse($0, flags: ["--verbose"], takesTLS: true) }
    // The certificate and key are read and checked now: a key that does not match fails here.
    var tls: TLSServerConfiguration?
    if let certificate = options.tlsCertificate, let key = options.tlsKey {
        do {
            tls = try TLSServerConfiguration(certificateChain: .file(certificate), privateKey: .file(key))
        } catch {
            printError("echo: \(error)")
            return 1
        }
    }

    // The main thread becomes the loop thread: every callback below runs here.
    // No file descriptor (or thread) left: one line on standard error, and a failure status.
    guard let loop = loopOnMainThread(program: "echo") else { return 1 }
    let subscriptions = CompoundDisposable()
    // State the callbacks share: confined to the loop (this thread), so the callbacks may capture it.
    let status = LoopBound(Int32(0), loop: loop)
    let clients = LoopBound(0, loop: loop)
    // The first interruption asks the server to drain, the second to force.
    let drainRequests = Subject<TCPServer.DrainRequest>()
    let interruptionCount = LoopBound(0, loop: loop)

    let server: Signal<EchoEvent>
    let place = options.place
    // Clients are served on a group's loops; the main loop only prints.
    let group = EventLoopGroup(loopCount: options.loops ?? onlineProcessorCount(), name: "echo")
    if let path = options.unixPath {
        server = EchoServer.run(unixPath: path, backlog: options.backlog, options: UnixSocketOptions(maxConnections: options.maxConnections,
                                                                           removeStaleSocketFile: true),
                                on: group, drain: drainRequests, tls: tls)
    } else {
        server = EchoServer.run(host: options.host, port: options.port!, backlog: options.backlog,
                                options: TCPOptions(maxConnections: options.maxConnections), on: group,
                                drain: drainRequests, tls: tls)
    }
    let verbose = options.flags.contains("--verbose")
    subscriptions.add(server.subscribe(
        next: { event in
            switch event {
            case .listening(let address):
                printLine("echo: listening on \(address)")
                printLine("echo: serving on \(group.loops.count) loop(s)")
            case .served(let peer, let loopName):
                if verbose { printLine("client \(describe(peer)) served on loop \(loopName)") }
            case .listeningOnPath(let path):
                printLine("echo: listening on unix \(path)")
                printLine("echo: serving on \(group.loops.count) loop(s)")
            // Counted here, on this loop, as the events arrive: the count an event carries was taken on
            // the loop that served the client, and two loops' events may arrive in either order (a
            // "2 open" before a "1 open" left the drain message saying 1 with 2 connected).
            case .connected(let peer, _):
                clients.value += 1
                printLine("client \(describe(peer)) connected (\(clients.value) open)")
            case .disconnected(let peer, let bytes, let error, _):
                clients.value -= 1
                let how = error.map { "dropped (\($0))" } ?? "left"
                printLine("client \(describe(peer)) \(how) after \(bytes) bytes (\(clients.value) open)")
            case .refused(let peer, let open):
                printLine("client \(describe(peer)) refused: \(open) connections open, the limit")
            case .handshakeFailed(let error):
                printLine("client refused by TLS: \(error)")
            case .draining(let open):
                printLine("echo: no longer accepting; \(open) connection(s) open: closing the idle ones, waiting for the others")
            }
        },
        error: { error in
            printError("echo: cannot serve on \(place): \(error)")
            status.value = 1
            subscriptions.dispose()
        },
        completed: {
            printLine("echo: drained")
            subscriptions.dispose()
        }))

    let drainTimeout = options.drainTimeout
    subscriptions.add(interruptions().subscribeNext { number in
        interruptionCount.value += 1
        if interruptionCount.value == 1 {
            printLine("interrupted by \(signalName(number)): draining \(clients.value) connection(s) for up to \(drainTimeout) (again to force)")
            drainRequests.sendNext(.graceful(timeout: drainTimeout, closingIdle: true))
        } else {
            printLine("interrupted by \(signalName(number)) again: resetting \(clients.value) connection(s)")
            drainRequests.sendNext(.force)
        }
    })

    // Returns once the subscriptions are disposed and the connections closed.
    loop.run()
    let result = status.value
    // This thread's loop first: once it is closed the thread is a plain one again and may wait
    // for the group's loops to close what they still hold (the server's disposal was queued to
    // them) and for their threads to end.
    loop.shutdown()
    group.shutdown()
    return result
}

/// One loop per online core (`sysconf(_SC_NPROCESSORS_ONLN)`), at least one.
func onlineProcessorCount() -> Int {
    max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}

exit(main())

// echo-async: the echo server written with async/await: `for try await` over the
// server's events and each connection's bytes, one task per client. The clients are
// served on a group's loops (each task runs on its connection's loop, its executor);
// the server's events are read on a loop of their own. The first Ctrl-C drains (no new
// clients; the connected ones are served until they leave, at most --drain-timeout), the
// second forces; then it exits 0.
//
//   echo-async --port 7000 [--host 127.0.0.1] [--max-connections N] [--backlog N] [--loops N] [--drain-timeout 10]
//   echo-async --unix /tmp/echo.sock [--max-connections N] [--backlog N] [--loops N] [--drain-timeout 10]
import EchoAsyncKit
import ReactiveUV
import SampleSupport
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
                    try await EchoAsyncServer.serve(options, on: group, drain: drainRequests, open: open, log: printLine)
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

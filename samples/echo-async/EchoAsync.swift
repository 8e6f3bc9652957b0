// echo-async: the echo server written with async/await: `for try await` over the
// server's connections and each connection's bytes, one task per client, all of
// them running on one event loop (the loop is their task executor).
//
//   echo-async --port 7000 [--host 127.0.0.1]
import ReactiveUV
import SampleSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    usage: echo-async --port N [--host ADDRESS]
      --port N          the TCP port to listen on; 0 picks a free one (printed)
      --host ADDRESS    the address to listen on (default 127.0.0.1)
    """

struct Options {
    var host = "127.0.0.1"
    var port = -1

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var reader = ArgumentReader(arguments)
        while let argument = try reader.next() {
            switch argument {
            case "--port":
                options.port = try reader.port(for: argument)
            case "--host":
                options.host = try reader.value(for: argument)
            default:
                throw UsageError("unknown argument '\(argument)'")
            }
        }
        guard options.port >= 0 else { throw UsageError("--port is required") }
        return options
    }
}

/// Serves until cancelled: one child task per connection, each echoing its bytes.
func serve(_ options: Options, on loop: EventLoop) async throws {
    // Client tasks all run on `loop`, so the count can live there, checked on each access.
    let open = LoopBound(0, loop: loop)
    try await withThrowingDiscardingTaskGroup { clients in
        for try await event in TCPServer.serve(host: options.host, port: options.port, on: loop).values(bufferingPolicy: .unbounded) {
            switch event {
            case .listening(let address):
                printLine("echo-async: listening on \(address)")
            case .refused, .draining:
                break  // no connection limit is set here
            case .accepted(let connection):
                open.value += 1
                let peer = describe(connection.peerAddress)
                printLine("client \(peer) connected (\(open.value) open)")
                clients.addTask(executorPreference: loop) {
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
                    // The client half-closed (or went away): close() sends what is still queued
                    // for it, then FIN. Wait for that, unless the server is being interrupted
                    // (the loop's shutdown then closes whatever is left).
                    let closing = connection.close()
                    if !Task.isCancelled, let error = await closing.waitUntilCompleted(), !(error is CancellationError) {
                        failure = failure ?? error
                    }
                    open.value -= 1
                    let how = failure.map { "dropped (\($0))" } ?? "left"
                    printLine("client \(peer) \(how) after \(echoed) bytes (\(open.value) open)")
                }
            }
        }
    }
}

@main
struct EchoAsync {
    static func main() async {
        let options = parseCommandLine(program: "echo-async", usage: usage, Options.parse)
        let loop = EventLoop(name: "echo-async")
        var status: Int32 = 0
        await withTaskGroup(of: Int32?.self) { group in
            group.addTask(executorPreference: loop) {
                do {
                    try await serve(options, on: loop)
                    return nil
                } catch {
                    printError("echo-async: cannot serve on \(options.host):\(options.port): \(error)")
                    return 1
                }
            }
            group.addTask(executorPreference: loop) {
                do {
                    for try await number in interruptions(on: loop).values {
                        printLine("interrupted by \(signalName(number)): closing every connection")
                        return 0
                    }
                } catch {
                    printError("echo-async: cannot watch for Ctrl-C: \(error)")
                    return 1
                }
                return nil
            }
            // The first task to finish decides: an error from the server, or Ctrl-C.
            // Cancelling the server ends its loop, which disposes the listener and its connections.
            if let first = await group.next() { status = first ?? 0 }
            group.cancelAll()
        }
        _ = try? await loop.shutdownGracefully()
        exit(status)
    }
}

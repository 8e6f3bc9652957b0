// A TCP echo server on every core: SIGTERM or Ctrl-C drains it (a second one resets the clients
// left), then it exits 0; a port it cannot listen on prints the error and exits 1.
import ReactiveUV
import Glibc

// PROGRAM-MAIN-BEGIN
let port = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 7000
let group = EventLoopGroup()  // one loop per core
let server = TCPServer.serve(port: port, on: group, onAccepted: { connection in
    _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
}, drain: Program.drainOnTermination(timeout: .seconds(10)))
    .on(value: { event in
        if case .listening(let address) = event { print("listening on \(address)"); fflush(nil) }
    })
exit(Program.run(server, shuttingDown: group))
// PROGRAM-MAIN-END

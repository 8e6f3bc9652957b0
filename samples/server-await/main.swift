// The `server` sample with a top-level `await`: main.swift is then async code on the main actor,
// and `Program.wait(for:shuttingDown:)` suspends instead of blocking.
import ReactiveUV
import Glibc

// PROGRAM-AWAIT-BEGIN
let port = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 7000
let group = EventLoopGroup()  // one loop per core
let server = TCPServer.serve(port: port, on: group, onAccepted: { connection in
    _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
}, drain: Program.drainOnTermination(timeout: .seconds(10)))
    .on(value: { event in
        if case .listening(let address) = event { print("listening on \(address)"); fflush(nil) }
    })
exit(await Program.wait(for: server, shuttingDown: group))
// PROGRAM-AWAIT-END

// The echo servers of the server scenarios (connection churn, idle connections), each
// in a process of its own so that its CPU time and resident memory are its own:
//
//   ServeBenchServer ours|ours-bytes|rawc|nio [--exit-at-stdin-eof]
//
// listens on 127.0.0.1, an ephemeral port printed on the first line of standard output, echoes
// what each client sends, closes a connection at the client's EOF, and runs until killed (or,
// with --exit-at-stdin-eof, until its standard input ends: the benchmark holds that pipe, so a
// server never outlives a benchmark that crashed). One
// thread serves: ours is `TCPServer.serve` on one loop (`ours` reads every connection with one
// `StreamReader`, `ours-bytes` with a `bytes` subscription each), raw C is libuv's echo-server shape
// (`rawc_echo_serve`), NIO is `ServerBootstrap` on a `MultiThreadedEventLoopGroup` of 1 thread.
// Node's side is `Benchmarks/node/churn_server.js`.
import CBaselines
import Foundation
import NIOCore
import NIOPosix
import ReactiveUV

let backlog: Int32 = 1024

func announce(_ port: Int) {
    print(port)
    fflush(nil) // every stream: standard output is a pipe, so block-buffered
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ServeBenchServer: \(message)\n".utf8))
    exit(1)
}

/// The main thread's work once the server runs: wait for the kill, or for standard input to end.
func waitForTheEnd() -> Never {
    if CommandLine.arguments.contains("--exit-at-stdin-eof") {
        var byte: UInt8 = 0
        while read(0, &byte, 1) > 0 {}
        exit(0)
    }
    while true { pause() }
}

/// Ours: every connection read by one `StreamReader` (`read(with:)`), or, with `subscribing`, by a
/// `bytes` subscription of its own.
func serveOurs(subscribing: Bool) -> Never {
    let loop = ReactiveUV.EventLoop(name: "serve-bench")
    // One reader for every connection, doing what each subscription does in the other form.
    let echo = StreamReader(next: { connection, chunk in connection.send(chunk) }, completed: { connection in connection.close() })
    let server = SerialDisposable()
    // Subscribed on the loop's thread, so the listener and every connection live there.
    loop.execute {
        server.inner = TCPServer.serve(port: 0, backlog: backlog).subscribe(next: { event in
            switch event {
            case .listening(let address):
                announce(address.port)
            case .refused, .draining:
                break
            case .accepted(let connection):
                if subscribing {
                    _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                } else {
                    connection.read(with: echo)
                }
            }
        }, error: { error in
            fail("TCPServer.serve failed: \(error)")
        })
    }
    waitForTheEnd()
}

final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(data, promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

func serveNIO() -> Never {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    do {
        // NIO closes a channel at the peer's EOF by default (allowRemoteHalfClosure false).
        let server = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: backlog)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler()) }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        announce(server.localAddress!.port!)
    } catch {
        fail("ServerBootstrap.bind failed: \(error)")
    }
    waitForTheEnd()
}

switch CommandLine.arguments.dropFirst().first {
case "ours":
    serveOurs(subscribing: false)
case "ours-bytes":
    serveOurs(subscribing: true)
case "rawc":
    // The C server runs on this thread, so another one watches standard input.
    if CommandLine.arguments.contains("--exit-at-stdin-eof") { Thread.detachNewThread { waitForTheEnd() } }
    let status = rawc_echo_serve(backlog, { port in announce(Int(port)) })
    fail("rawc_echo_serve returned \(status)")
case "nio":
    serveNIO()
default:
    fail("usage: ServeBenchServer ours|ours-bytes|rawc|nio")
}

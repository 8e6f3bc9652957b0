import CBaselines
import Foundation
import NIOCore
import NIOPosix

/// Figures of one TCP echo ping-pong run.
struct EchoFigures: Sendable {
    var roundTripsPerSecond: Double
    var medianMicroseconds: Double
}

/// Pins the calling thread to one CPU (or lets it run anywhere when `cpu` is nil).
func pinCurrentThread(to cpu: Int?) {
    rawc_pin_current_thread(Int32(cpu ?? -1))
}

enum TCPAnchors {
    static func rawEcho(size: Int, warmup: Int, measure: Int, serverCPU: Int?, clientCPU: Int?) -> EchoFigures {
        var latencies = [UInt64](repeating: 0, count: 2_000_000)
        var result = rawc_echo_result()
        _ = rawc_tcp_echo(Int32(size), Int32(warmup), Int32(measure), Int32(serverCPU ?? -1), Int32(clientCPU ?? -1),
                          &latencies, UInt64(latencies.count), &result)
        let sorted = latencies.prefix(Int(result.recorded)).sorted()
        return EchoFigures(roundTripsPerSecond: Double(result.round_trips) / (Double(result.elapsed_ns) / 1e9),
                           medianMicroseconds: percentile(Array(sorted), 0.5) / 1000)
    }

    static func rawPump(total: UInt64) -> Double {
        let elapsed = rawc_tcp_pump(total, 65_536, 8)
        return elapsed == 0 ? 0 : Double(total) / 1e6 / (Double(elapsed) / 1e9)
    }

    // MARK: SwiftNIO

    final class EchoHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }
    }

    final class PingPongHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let size: Int
        let measureFrom: UInt64
        let measureUntil: UInt64
        let done: EventLoopPromise<EchoFigures>
        var received = 0
        var sentAt: UInt64 = 0
        var latencies: [UInt64] = []
        var roundTrips = 0

        init(size: Int, measureFrom: UInt64, measureUntil: UInt64, done: EventLoopPromise<EchoFigures>) {
            self.size = size
            self.measureFrom = measureFrom
            self.measureUntil = measureUntil
            self.done = done
            latencies.reserveCapacity(1_000_000)
        }

        func channelActive(context: ChannelHandlerContext) { send(context) }

        private func send(_ context: ChannelHandlerContext) {
            var buffer = context.channel.allocator.buffer(capacity: size)
            buffer.writeRepeatingByte(UInt8(ascii: "x"), count: size)
            sentAt = nanoseconds()
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += unwrapInboundIn(data).readableBytes
            guard received >= size else { return }
            received = 0
            let now = nanoseconds()
            if now >= measureFrom {
                roundTrips += 1
                latencies.append(now - sentAt)
            }
            if now >= measureUntil {
                let elapsed = Double(now - measureFrom) / 1e9
                let sorted = latencies.sorted()
                done.succeed(EchoFigures(roundTripsPerSecond: Double(roundTrips) / elapsed,
                                         medianMicroseconds: percentile(sorted, 0.5) / 1000))
                context.close(promise: nil)
                return
            }
            send(context)
        }
    }

    static func nioEcho(size: Int, warmup: Int, measure: Int, serverCPU: Int?, clientCPU: Int?) -> EchoFigures? {
        let serverGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer {
            try? clientGroup.syncShutdownGracefully()
            try? serverGroup.syncShutdownGracefully()
        }
        try? serverGroup.next().submit { pinCurrentThread(to: serverCPU) }.wait()
        try? clientGroup.next().submit { pinCurrentThread(to: clientCPU) }.wait()
        do {
            let server = try ServerBootstrap(group: serverGroup)
                .serverChannelOption(ChannelOptions.backlog, value: 128)
                .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler()) }
                }
                .bind(host: "127.0.0.1", port: 0).wait()
            defer { try? server.close().wait() }
            let port = server.localAddress!.port!
            let clientLoop = clientGroup.next()
            let done = clientLoop.makePromise(of: EchoFigures.self)
            let start = nanoseconds()
            let from = start + UInt64(warmup) * 1_000_000, until = from + UInt64(measure) * 1_000_000
            _ = try ClientBootstrap(group: clientLoop)
                .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            PingPongHandler(size: size, measureFrom: from, measureUntil: until, done: done))
                    }
                }
                .connect(host: "127.0.0.1", port: port).wait()
            return try done.futureResult.wait()
        } catch {
            print("   (SwiftNIO echo failed: \(error))")
            return nil
        }
    }

    // MARK: Node

    static func nodeEcho(size: Int, warmup: Int, measure: Int, serverCPU: Int?, clientCPU: Int?) -> EchoFigures? {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("node")
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = (serverCPU.map { ["taskset", "-c", String($0)] } ?? []) + ["node", directory.appendingPathComponent("echo_server.js").path]
        let portPipe = Pipe()
        server.standardOutput = portPipe
        do { try server.run() } catch { return nil }
        defer { server.terminate(); server.waitUntilExit() }
        var portLine = Data()
        while !portLine.contains(UInt8(ascii: "\n")) {
            let chunk = portPipe.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            portLine.append(chunk)
        }
        let port = String(decoding: portLine, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        client.arguments = (clientCPU.map { ["taskset", "-c", String($0)] } ?? [])
            + ["node", directory.appendingPathComponent("echo_client.js").path, port, String(size), String(warmup), String(measure)]
        let output = Pipe()
        client.standardOutput = output
        do { try client.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        client.waitUntilExit()
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let rate = (object["round_trips_per_s"] as? NSNumber)?.doubleValue,
              let median = (object["median_us"] as? NSNumber)?.doubleValue else { return nil }
        return EchoFigures(roundTripsPerSecond: rate, medianMicroseconds: median)
    }
}

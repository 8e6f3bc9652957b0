import CBaselines
import Foundation
import NIOCore
import NIOPosix
import ReactiveUV
import Synchronization

/// The scaling scenario: one server on one loop against the same server on two loops
/// of a group, beside SwiftNIO's `MultiThreadedEventLoopGroup` and Node's `cluster`.
///
/// Each contender serves 64 connections of one C client (`rawc_scaling_client`: one libuv
/// loop on one thread, the lightest client we have); each connection keeps 4 requests of
/// 4,096 bytes in flight, and the server answers each with its FNV-1a hash (8 passes over the
/// 4 KiB, about 40 µs of CPU), 4 bytes. Ours and NIO call the same C hash; Node hashes in JS.
enum ScalingScenarios {
    static let connections = 64
    static let depth = 4
    static let rounds = 8
    static let requestSize = 4096

    struct Figures {
        var requestsPerSecond: Double
        /// The client thread's CPU time over the measured wall time (1 = one core).
        var clientCores: Double
        /// For a server in this process: its threads' CPU time per request (or connection), µs —
        /// steadier than the rate on a shared machine.
        var serverMicrosecondsPerOperation: Double?
        /// How the connections were spread over the loops, when known ("35/29").
        var spread: String?
    }

    static func figures(operations: UInt64, elapsed: UInt64, clientCPU: UInt64, processCPU: UInt64, inProcess: Bool) -> Figures {
        let server = inProcess && operations > 0 && processCPU > clientCPU ? Double(processCPU - clientCPU) / 1000 / Double(operations) : nil
        return Figures(requestsPerSecond: Double(operations) / (Double(elapsed) / 1e9),
                       clientCores: Double(clientCPU) / Double(elapsed), serverMicrosecondsPerOperation: server)
    }

    static func serverCost(_ figures: Figures) -> String {
        (figures.serverMicrosecondsPerOperation.map {
            // CPU per operation × operations per second: how many cores the server got.
            "; server CPU \(format($0)) µs/op (\(format($0 * figures.requestsPerSecond / 1e6)) cores busy)"
        } ?? "")
            + (figures.spread.map { "; connections per loop \($0)" } ?? "")
    }

    static func scaling(warmup: Int, measure: Int) -> ScenarioResult {
        let oursOne = ours(loops: 1, warmup: warmup, measure: measure)
        let oursTwo = ours(loops: 2, warmup: warmup, measure: measure)
        let nioOne = nio(threads: 1, warmup: warmup, measure: measure)
        let nioTwo = nio(threads: 2, warmup: warmup, measure: measure)
        let nodeOne = node(workers: 1, warmup: warmup, measure: measure)
        let nodeTwo = node(workers: 2, warmup: warmup, measure: measure)
        var measurements: [Measurement] = []
        func add(_ name: String, _ figures: Figures?, _ single: Figures?, _ what: String) {
            guard let figures else { return }
            let speedUp = single.map { ", \(format(figures.requestsPerSecond / $0.requestsPerSecond))× its one-thread row" } ?? ""
            measurements.append(Measurement(name, figures.requestsPerSecond / 1000,
                                            detail: "\(what)\(speedUp); client \(format(figures.clientCores * 100))% of a core\(serverCost(figures))"))
        }
        add(Contender.ours, oursTwo, oursOne, "TCPServer.serve(on: group), 2 loops")
        add(oneLoop, oursOne, nil, "TCPServer.serve(on: group), 1 loop")
        add(Contender.nio, nioTwo, nioOne, "MultiThreadedEventLoopGroup, 2 threads")
        add(nioOneThread, nioOne, nil, "MultiThreadedEventLoopGroup, 1 thread")
        add(Contender.node, nodeTwo, nodeOne, "cluster, 2 workers")
        add(nodeOneWorker, nodeOne, nil, "cluster, 1 worker")
        return ScenarioResult(
            name: "Scaling (one loop → two)",
            workload: "\(connections) connections from one C client loop, \(depth) pipelined 4 KiB requests each, reply = FNV-1a over the request ×\(rounds); \(measure) ms after \(warmup) ms warm-up, \(ProcessInfo.processInfo.activeProcessorCount) cores",
            unit: "k requests/s", higherIsBetter: true, target: (oneLoop, 1.6), measurements: measurements)
    }

    /// Ours only, one loop and two alternated `rounds` times: on a shared machine a burst of
    /// someone else's work hits one row of a run; the median of the pairs' ratios holds better.
    static func interleaved(rounds: Int, warmup: Int, measure: Int) -> ScenarioResult {
        var ones: [Double] = [], twos: [Double] = [], ratios: [Double] = [], busy1: [Double] = [], busy2: [Double] = []
        for _ in 0..<rounds {
            guard let one = ours(loops: 1, warmup: warmup, measure: measure),
                  let two = ours(loops: 2, warmup: warmup, measure: measure) else { continue }
            ones.append(one.requestsPerSecond / 1000)
            twos.append(two.requestsPerSecond / 1000)
            ratios.append(two.requestsPerSecond / one.requestsPerSecond)
            busy1.append((one.serverMicrosecondsPerOperation ?? 0) * one.requestsPerSecond / 1e6)
            busy2.append((two.serverMicrosecondsPerOperation ?? 0) * two.requestsPerSecond / 1e6)
        }
        let listed = ratios.map { format($0) }.joined(separator: ", ")
        return ScenarioResult(
            name: "Scaling, ours interleaved",
            workload: "the Scaling workload, ours on 1 and 2 loops alternated \(rounds) times; medians",
            unit: "k requests/s", higherIsBetter: true, target: (oneLoop, 1.6),
            measurements: [Measurement(Contender.ours, median(twos), detail: "2 loops; pair ratios \(listed); median ratio \(format(median(ratios)))×; cores busy \(busy2.map { format($0) }.joined(separator: ", "))"),
                           Measurement(oneLoop, median(ones), detail: "1 loop; cores busy \(busy1.map { format($0) }.joined(separator: ", "))")])
    }

    static let oneLoop = "ours, 1 loop"
    static let nioOneThread = "NIO, 1 thread"
    static let nodeOneWorker = "Node, 1 worker"

    /// Runs the C client against `port` on the calling thread.
    static func runClient(port: Int, warmup: Int, measure: Int, inProcess: Bool = true) -> Figures? {
        var result = rawc_scaling_result()
        let status = rawc_scaling_client(Int32(port), Int32(connections), Int32(depth), Int32(rounds),
                                         Int32(warmup), Int32(measure), &result)
        guard status == 0, result.elapsed_ns > 0 else {
            print("   (scaling client failed: status \(status), \(result.mismatches) wrong replies)")
            return nil
        }
        if result.mismatches > 0 { print("   (\(result.mismatches) replies had the wrong hash)") }
        return figures(operations: result.replies, elapsed: result.elapsed_ns, clientCPU: result.client_cpu_ns,
                       processCPU: result.process_cpu_ns, inProcess: inProcess)
    }

    // MARK: ours

    /// One connection's request being filled: confined to the connection's loop.
    final class HashSession: @unchecked Sendable {
        // Touched only in the connection's `bytes` callback, on its loop thread.
        private var pending = [UInt8](repeating: 0, count: ScalingScenarios.requestSize)
        private var filled = 0

        /// Takes a chunk; returns the replies of the requests it completed (4 bytes each).
        func consume(_ chunk: [UInt8]) -> [UInt8] {
            var replies: [UInt8] = []
            var offset = 0
            while offset < chunk.count {
                let take = min(ScalingScenarios.requestSize - filled, chunk.count - offset)
                pending.withUnsafeMutableBufferPointer { target in
                    chunk.withUnsafeBufferPointer { source in
                        UnsafeMutableRawPointer(target.baseAddress! + filled)
                            .copyMemory(from: source.baseAddress! + offset, byteCount: take)
                    }
                }
                filled += take
                offset += take
                if filled == ScalingScenarios.requestSize {
                    filled = 0
                    let hash = pending.withUnsafeBufferPointer {
                        rawc_scaling_hash($0.baseAddress, Int32(ScalingScenarios.requestSize), Int32(ScalingScenarios.rounds))
                    }
                    withUnsafeBytes(of: hash.littleEndian) { replies.append(contentsOf: $0) }
                }
            }
            return replies
        }
    }

    static func ours(loops: Int, warmup: Int, measure: Int) -> Figures? {
        let group = EventLoopGroup(loopCount: loops, name: "scaling")
        defer { group.shutdown() }
        let port = Atomic<Int>(0)
        let listening = CondFlag()
        let perLoop = Mutex<[String: Int]>([:])
        let server = TCPServer.serve(port: 0, backlog: 1024, on: group, onAccepted: { connection in
            perLoop.withLock { $0[connection.loop.name, default: 0] += 1 }
            // On the connection's loop: the subscription's home is that loop.
            let session = HashSession()
            _ = connection.bytes.subscribe(next: { chunk in
                let replies = session.consume(chunk)
                if !replies.isEmpty { connection.send(replies) }
            })
        }).subscribe(next: { event in
            if case .listening(let address) = event {
                port.store(address.port, ordering: .releasing)
                listening.signal()
            }
        }, error: { error in
            print("   (our scaling server failed: \(error))")
            listening.signal()
        })
        listening.wait()
        defer { server.dispose() }
        let bound = port.load(ordering: .acquiring)
        guard bound != 0 else { return nil }
        var figures = runClient(port: bound, warmup: warmup, measure: measure)
        figures?.spread = perLoop.withLock { counts in group.loops.map { String(counts[$0.name] ?? 0) }.joined(separator: "/") }
        return figures
    }

    // MARK: connection churn

    /// Connections per second through our group server (an echo per connection), one C client
    /// loop keeping `inFlight` connections going: connect, 64 bytes there and back, close. The
    /// measure behind the choice of the group design (docs/INTERNALS.md, "Serving on a group");
    /// the churn scenario against raw C, NIO and Node is `ServerScenarios`'.
    static func churn(warmup: Int, measure: Int) -> ScenarioResult {
        let one = oursChurn(loops: 1, warmup: warmup, measure: measure)
        let two = oursChurn(loops: 2, warmup: warmup, measure: measure)
        var measurements: [Measurement] = []
        for (name, figures, what) in [(Contender.ours, two, "2 loops"), (oneLoop, one, "1 loop")] {
            guard let figures else { continue }
            measurements.append(Measurement(name, figures.requestsPerSecond / 1000,
                                            detail: "TCPServer.serve(on: group), \(what); client \(format(figures.clientCores * 100))% of a core\(serverCost(figures))"))
        }
        return ScenarioResult(
            name: "Group accept churn",
            workload: "100 connections in flight from one C client loop, each: connect, 64 bytes echoed, close; \(measure) ms after \(warmup) ms warm-up",
            unit: "k connections/s", higherIsBetter: true, target: nil, measurements: measurements)
    }

    static func oursChurn(loops: Int, warmup: Int, measure: Int) -> Figures? {
        let group = EventLoopGroup(loopCount: loops, name: "churn")
        defer { group.shutdown() }
        let port = Atomic<Int>(0)
        let listening = CondFlag()
        let server = TCPServer.serve(port: 0, backlog: 1024, on: group, onAccepted: { connection in
            _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
        }).subscribe(next: { event in
            if case .listening(let address) = event {
                port.store(address.port, ordering: .releasing)
                listening.signal()
            }
        }, error: { error in
            print("   (our churn server failed: \(error))")
            listening.signal()
        })
        listening.wait()
        defer { server.dispose() }
        let bound = port.load(ordering: .acquiring)
        guard bound != 0 else { return nil }
        var result = rawc_churn_result()
        guard rawc_churn_client(Int32(bound), 100, Int32(warmup), Int32(measure), 0, &result) == 0, result.elapsed_ns > 0 else { return nil }
        if result.failures > 0 { print("   (\(result.failures) churn connections failed)") }
        return figures(operations: result.connections, elapsed: result.elapsed_ns, clientCPU: result.client_cpu_ns,
                       processCPU: result.process_cpu_ns, inProcess: true)
    }

    // MARK: SwiftNIO

    final class HashHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var pending = [UInt8](repeating: 0, count: ScalingScenarios.requestSize)
        private var filled = 0

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            var replies: ByteBuffer?
            while buffer.readableBytes > 0 {
                let take = min(ScalingScenarios.requestSize - filled, buffer.readableBytes)
                let start = filled
                pending.withUnsafeMutableBytes { target in
                    buffer.withUnsafeReadableBytes { source in
                        (target.baseAddress! + start).copyMemory(from: source.baseAddress!, byteCount: take)
                    }
                }
                buffer.moveReaderIndex(forwardBy: take)
                filled += take
                if filled == ScalingScenarios.requestSize {
                    filled = 0
                    let hash = pending.withUnsafeBufferPointer {
                        rawc_scaling_hash($0.baseAddress, Int32(ScalingScenarios.requestSize), Int32(ScalingScenarios.rounds))
                    }
                    if replies == nil { replies = context.channel.allocator.buffer(capacity: 64) }
                    replies!.writeInteger(hash, endianness: .little)
                }
            }
            if let replies { context.writeAndFlush(wrapOutboundOut(replies), promise: nil) }
        }
    }

    static func nio(threads: Int, warmup: Int, measure: Int) -> Figures? {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        defer { try? group.syncShutdownGracefully() }
        do {
            let server = try ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: 1024)
                .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(HashHandler()) }
                }
                .bind(host: "127.0.0.1", port: 0).wait()
            defer { try? server.close().wait() }
            return runClient(port: server.localAddress!.port!, warmup: warmup, measure: measure)
        } catch {
            print("   (NIO scaling server failed: \(error))")
            return nil
        }
    }

    // MARK: Node

    static func node(workers: Int, warmup: Int, measure: Int) -> Figures? {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("node")
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["node", directory.appendingPathComponent("scaling_server.js").path, String(workers), String(rounds)]
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
        guard let port = Int(String(decoding: portLine, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        return runClient(port: port, warmup: warmup, measure: measure, inProcess: false)
    }
}

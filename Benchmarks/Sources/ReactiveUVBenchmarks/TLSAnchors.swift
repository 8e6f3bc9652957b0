import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// SwiftNIO + NIOSSL (BoringSSL, vendored) on the TLS scenarios' workloads: server and client on
/// one event loop thread, the same certificate, the client verifying it and the name "localhost".
enum TLSAnchors {
    static func contexts(_ files: TLSFiles) throws -> (server: NIOSSLContext, client: NIOSSLContext) {
        let certificates = try NIOSSLCertificate.fromPEMFile(files.certificate)
        let key = try NIOSSLPrivateKey(file: files.key, format: .pem)
        var server = TLSConfiguration.makeServerConfiguration(certificateChain: certificates.map { .certificate($0) },
                                                               privateKey: .privateKey(key))
        var client = TLSConfiguration.makeClientConfiguration()
        client.trustRoots = .certificates(certificates)
        // NIOSSL would offer X25519MLKEM768 first; the scenarios' key exchange is X25519, as OpenSSL 3.0's.
        server.curves = [.x25519]
        client.curves = [.x25519]
        return (try NIOSSLContext(configuration: server), try NIOSSLContext(configuration: client))
    }

    /// Counts decrypted bytes; fulfils `done` with the time the last arrived.
    final class CountingHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let total: UInt64
        let done: EventLoopPromise<UInt64>
        var received: UInt64 = 0

        init(total: UInt64, done: EventLoopPromise<UInt64>) {
            self.total = total
            self.done = done
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += UInt64(unwrapInboundIn(data).readableBytes)
            if received >= total { done.succeed(nanoseconds()) }
        }
    }

    /// After the handshake, keeps `8` writes of 64 KiB in flight until `total` bytes were written.
    final class PumpHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let total: UInt64
        let started: EventLoopPromise<UInt64>
        var queued: UInt64 = 0
        var payload = ByteBuffer(repeating: 0x70, count: 65_536)

        init(total: UInt64, started: EventLoopPromise<UInt64>) {
            self.total = total
            self.started = started
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted = event as? TLSUserEvent {
                started.succeed(nanoseconds())
                for _ in 0..<8 { send(context) }
            }
            context.fireUserInboundEventTriggered(event)
        }

        private func send(_ context: ChannelHandlerContext) {
            guard queued < total else { return }
            queued += UInt64(payload.readableBytes)
            let promise = context.eventLoop.makePromise(of: Void.self)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { loopBound.value.0.send(loopBound.value.1) }
            context.writeAndFlush(wrapOutboundOut(payload), promise: promise)
        }
    }

    static func nioPump(_ files: TLSFiles, total: UInt64) -> Double? {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        do {
            let (serverContext, clientContext) = try contexts(files)
            let loop = group.next()
            let done = loop.makePromise(of: UInt64.self)
            let started = loop.makePromise(of: UInt64.self)
            let server = try ServerBootstrap(group: group)
                .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: serverContext))
                        try channel.pipeline.syncOperations.addHandler(CountingHandler(total: total, done: done))
                    }
                }
                .bind(host: "127.0.0.1", port: 0).wait()
            defer { try? server.close().wait() }
            let client = try ClientBootstrap(group: group)
                .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: clientContext, serverHostname: "localhost"))
                        try channel.pipeline.syncOperations.addHandler(PumpHandler(total: total, started: started))
                    }
                }
                .connect(host: "127.0.0.1", port: server.localAddress!.port!).wait()
            defer { try? client.close().wait() }
            let begin = try started.futureResult.wait()
            let end = try done.futureResult.wait()
            return Double(total) / 1e6 / (Double(end - begin) / 1e9)
        } catch {
            print("   (SwiftNIO TLS pump failed: \(error))")
            return nil
        }
    }

    /// Server side: counts finished handshakes, closes when the client's end arrives.
    final class ServerHandshakeHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let counter: HandshakeState
        let count: Int
        let done: EventLoopPromise<UInt64>

        init(counter: HandshakeState, count: Int, done: EventLoopPromise<UInt64>) {
            self.counter = counter
            self.count = count
            self.done = done
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted = event as? TLSUserEvent {
                counter.serverDone += 1
                if counter.serverDone == count { done.succeed(nanoseconds()) }
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    /// Client side: closes (close_notify, then the socket) once the handshake finished, then starts the next.
    final class ClientHandshakeHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let next: () -> Void

        init(next: @escaping () -> Void) { self.next = next }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted = event as? TLSUserEvent {
                context.close(promise: nil)
                next()
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    static func nioHandshakes(_ files: TLSFiles, count: Int, inFlight: Int) -> Double? {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        do {
            let (serverContext, clientContext) = try contexts(files)
            let loop = group.next()
            let done = loop.makePromise(of: UInt64.self)
            let state = HandshakeState()
            let server = try ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: 1024)
                .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: serverContext))
                        try channel.pipeline.syncOperations.addHandler(ServerHandshakeHandler(counter: state, count: count, done: done))
                    }
                }
                .bind(host: "127.0.0.1", port: 0).wait()
            defer { try? server.close().wait() }
            let port = server.localAddress!.port!
            @Sendable func connectNext() {
                guard state.opened < count else { return }
                state.opened += 1
                ClientBootstrap(group: loop)
                    .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: clientContext, serverHostname: "localhost"))
                            try channel.pipeline.syncOperations.addHandler(ClientHandshakeHandler(next: connectNext))
                        }
                    }
                    .connect(host: "127.0.0.1", port: port)
                    .whenFailure { error in
                        print("   (SwiftNIO TLS connect failed: \(error))")
                        done.fail(error)
                    }
            }
            let started = try loop.submit { () -> UInt64 in
                let now = nanoseconds()
                for _ in 0..<inFlight { connectNext() }
                return now
            }.wait()
            let finished = try done.futureResult.wait()
            return Double(count) / (Double(finished - started) / 1e9)
        } catch {
            print("   (SwiftNIO TLS handshakes failed: \(error))")
            return nil
        }
    }
}

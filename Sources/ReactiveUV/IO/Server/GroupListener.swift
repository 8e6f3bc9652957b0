import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One TCP server subscription served on every loop of a group (`TCPServer.serve(on: group)`).
///
/// The group's first loop (the coordinator) checks that every loop runs, resolves the host,
/// and binds one `SO_REUSEPORT` socket per loop (`ReusePortSocket`), all listening before
/// `.listening` is sent; each loop then adopts its socket in a `TCPListener` of its own (its
/// share), through that loop's queue, and accepts and homes the connections the kernel
/// hashes onto it. A loop's shutdown ends only its share. The rest (the shares, the shared
/// `ConnectionBudget`, failure, disposal and the drain, sent to every share at once) is
/// `GroupServer`'s.
///
/// Why one socket per loop rather than one accepting loop handing descriptors to the others:
/// see docs/INTERNALS.md, "Serving on a group".
///
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; `start()` runs on the
/// coordinator's thread; each share's callbacks run on its own loop's thread.
final class GroupListener: GroupServer<TCPListener>, @unchecked Sendable {
    // Adds only immutable settings to `GroupServer`, whose state is behind its mutex.

    private let host: String
    private let port: Int
    private let backlog: ListenBacklog
    private let options: TCPOptions

    init(group: EventLoopGroup, host: String, port: Int, backlog: ListenBacklog, options: TCPOptions,
         onAccepted: (@Sendable (TCPConnection) -> Void)?, output: GroupServerOutput<TCPServer.Event>) {
        self.host = host
        self.port = port
        self.backlog = backlog
        self.options = options
        super.init(group: group, maxConnections: options.maxConnections, drainOrder: .everyShareAtOnce,
                   onAccepted: onAccepted, output: output)
    }

    /// Checks the loops, then resolves the host (at once when numeric) and starts every share.
    ///
    /// Thread rule: the coordinator's loop thread.
    func start() {
        coordinator.assertInEventLoop("GroupListener.start")
        guard everyLoopRuns() else { return }
        if let refusal = TCPListener.optionsRefusal(options, origin: "TCPServer.serve(on: group)")
            ?? backlog.refusal(context: "TCPServer.serve(on: group)") {
            fail(refusal)
            return
        }
        let lookup = HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: coordinator) { [self] result in
            switch result {
            case .success(let addresses): bindAll(addresses[0])
            case .failure(let error): fail(error)
            }
        }
        if let lookup, !keepLookup(lookup) { lookup.dispose() }
    }

    /// Binds a socket per loop, says `.listening`, and hands each loop its socket.
    private func bindAll(_ address: SocketAddress) {
        let loops = group.loops
        let descriptors: [Int32]
        let bound: SocketAddress
        do {
            (descriptors, bound) = try ReusePortSocket.bindAll(count: loops.count, to: address, backlog: backlog.value)
        } catch {
            fail(error)
            return
        }
        let shares = loops.indices.map { index in
            TCPListener(loop: loops[index], source: .descriptor(descriptors[index], bound), backlog: backlog,
                        options: options, budget: budget, callbacks: callbacks(for: loops[index]))
        }
        guard beginServing(shares) else {
            for descriptor in descriptors { Glibc.close(descriptor) }
            return
        }
        // Sent before any loop adopts its socket, so it reaches the subscriber before any
        // `.accepted` (which a loop sends only after its start, queued after this send).
        // Every socket listens already: a client connecting now is queued, not refused.
        send(.listening(bound))
        for (share, descriptor) in zip(shares, descriptors) {
            if share.loop.inEventLoop {
                share.start()
                continue
            }
            do {
                try share.loop.tryExecute { share.start() }
            } catch {
                // The loop shut down since the check: its socket is closed here, its share
                // ends as a loop's shutdown ends it.
                Glibc.close(descriptor)
                shareEndedByLoopShutdown(share.loop)
            }
        }
    }

    /// What a share tells: its events go to the subscriber (after `onAccepted`, on the share's
    /// loop); its error ends the whole server; its loop's shutdown ends only the share.
    private func callbacks(for loop: EventLoop) -> TCPListener.Callbacks {
        TCPListener.Callbacks(
            onEvent: { [self] event in send(event) },
            onError: { [self] error in fail(error) },
            onLoopShutdown: { [self] in shareEndedByLoopShutdown(loop) })
    }
}

extension TCPListener: GroupShare {
    typealias Event = TCPServer.Event
}

extension TCPServer.Event: GroupServerEvent {
    /// The connection of `.accepted`; nil for every other event.
    var acceptedConnection: TCPConnection? {
        if case .accepted(let connection) = self { connection } else { nil }
    }
}

internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A Unix socket server on a group (`UnixSocket.serve(on: group)`): one socket, the first loop accepting.
///
/// `SO_REUSEPORT` does not exist for `AF_UNIX`, so one socket is bound. The first loop's share accepts
/// and hands each client to the next share in turn, itself included, skipping loops that are shutting
/// down; the others have no socket and open the connections handed to them. The accepting share takes
/// the shared `ConnectionBudget` at the accept, so a refusal needs no hop. See docs/INTERNALS.md,
/// "Serving on a group".
extension UnixListeningSocket {
    /// Makes a share per loop, the first one accepting, and starts it (bind, listen, `.listening`).
    ///
    /// Thread rule: the group's first loop's thread.
    static func startShares(of server: GroupServer<UnixListeningSocket>, path: String) {
        let loops = server.group.loops
        let shares = loops.indices.map { index in
            server.makeShare(UnixListeningSocket(loop: loops[index], accepts: index == 0, path: path, what: "UnixSocket.serve(on: group)",
                                                 backlog: server.backlog, options: server.options, inGroup: true))
        }
        guard server.beginServing(shares) else { return }
        shares[0].socket.homes = shares
        shares[0].start()
    }

    /// A client waits: accept it here, or hand it to the share whose turn it is.
    func clientWaits() {
        guard let listener else { return }
        if let home = takeNextHome(), home !== listener {
            handOff(to: home, from: listener)
        } else {
            listener.acceptPending()
        }
    }

    /// The share the next client goes to (round robin over `homes`), skipping the loops that have
    /// begun shutting down; nil on one loop.
    private func takeNextHome() -> Listener<UnixListeningSocket>? {
        guard !homes.isEmpty else { return nil }
        for _ in homes.indices {
            let home = homes[nextHome]
            nextHome = (nextHome + 1) % homes.count
            // The other loop's state is read without its lock: a hint, checked again on that loop.
            if home === listener || !home.loop.shutdownRequested { return home }
        }
        return listener
    }

    /// Takes the pending client, counts it against the limit here (so a refusal is at once, with
    /// no hop), and queues it to `home`'s loop, which opens it there.
    private func handOff(to home: Listener<UnixListeningSocket>, from listener: Listener<UnixListeningSocket>) {
        let descriptor: Int32
        do {
            descriptor = try PendingConnectionTaker.take(from: pointer(as: uv_stream_t.self), on: loop)
        } catch {
            reportMisuse("a connection could not be accepted on \(place): \(error)")
            return
        }
        guard listener.budget.take() else {
            Glibc.close(descriptor)  // the client reads EOF
            listener.tell(.refused(open: listener.budget.open))
            return
        }
        let parcel = HandedOffConnection(descriptor: descriptor, budget: listener.budget)
        // Refused only once that loop has closed: the parcel is closed here, once.
        if !home.loop.enqueue({ home.socket.adopt(parcel) }) { parcel.discard() }
    }

    /// Opens on this loop a connection the accepting share handed over, and sends it; closes it
    /// instead (the client reads EOF) when this share has ended or its loop was asked to shut down
    /// meanwhile (it would close the connection moments later).
    ///
    /// Loop thread only.
    func adopt(_ parcel: HandedOffConnection) {
        guard let listener, listener.takesConnections, !loop.shutdownRequested, let descriptor = parcel.take() else {
            parcel.discard()
            return
        }
        let connection = makeConnection()
        do throws(UVError) {
            try connection.open()
            try uvCheck(uv_pipe_open(connection.pointer(as: uv_pipe_t.self), descriptor), "uv_pipe_open")
        } catch {
            Glibc.close(descriptor)  // libuv did not take it (uv_pipe_open takes it only when it succeeds)
            connection.end(.closed)
            listener.budget.give()
            reportMisuse("a connection handed to loop '\(loop.name)' could not be opened on \(place): \(error)")
            return
        }
        listener.keep(handedOff: connection)
    }
}

/// A client the accepting share took for another loop: its descriptor and its unit of the connection
/// budget, owned here from the accept until that loop opens it, or closed (and the unit given back)
/// exactly once: by `discard()`, or when the last reference goes (a hop that was dropped).
///
/// Thread rule: safe from any thread (one atomic descriptor).
final class HandedOffConnection: Sendable {
    /// The descriptor, or -1 once taken or closed.
    private let descriptor: Atomic<Int32>
    private let budget: ConnectionBudget

    init(descriptor: Int32, budget: ConnectionBudget) {
        self.descriptor = Atomic(descriptor)
        self.budget = budget
    }

    /// The descriptor, now the caller's (with the budget unit); nil once taken or discarded.
    func take() -> Int32? {
        let taken = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        return taken >= 0 ? taken : nil
    }

    /// Closes the descriptor (the client reads EOF) and gives the budget unit back, unless taken.
    func discard() {
        guard let taken = take() else { return }
        Glibc.close(taken)
        budget.give()
    }

    deinit { discard() }
}

/// A `uv_pipe_t` that lives only to take one pending client from a listener (`uv_accept`) and give
/// up a duplicate of its descriptor, for another loop to open: libuv 1.44 has no public call that
/// hands over an accepted descriptor.
///
/// Loop thread only.
private final class PendingConnectionTaker: LoopHandle {
    override var label: String { "unix socket connection being handed to another loop" }

    /// The pending client's descriptor (a duplicate, close-on-exec), now the caller's.
    static func take(from listener: UnsafeMutablePointer<uv_stream_t>, on loop: EventLoop) throws(UVError) -> Int32 {
        let taker = PendingConnectionTaker(loop: loop, byteCount: uv_handle_size(UV_NAMED_PIPE))
        try uvCheck(uv_pipe_init(loop.uvLoop, taker.pointer(as: uv_pipe_t.self), 0), "uv_pipe_init")
        taker.didOpen()
        // Closing the handle closes the descriptor libuv accepted; the duplicate stays open.
        defer { taker.closeHandle() }
        try uvCheck(uv_accept(listener, taker.pointer(as: uv_stream_t.self)), "uv_accept")
        var accepted = uv_os_fd_t()
        try uvCheck(uv_fileno(taker.handle, &accepted), "uv_fileno")
        let duplicate = fcntl(accepted, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { throw UVError(code: -errno, context: "duplicating an accepted connection for another loop") }
        return duplicate
    }
}

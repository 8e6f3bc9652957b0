internal import CLibUV
import Synchronization

/// How many connections a server keeps open, against its limit: one per server subscription,
/// shared by the listeners of every loop when it serves on a group (`TCPServer.serve(on: group)`),
/// so the limit counts across the group.
///
/// Thread rule: safe from any thread (one atomic count).
final class ConnectionBudget: Sendable {
    /// The most connections open at once (nil: no limit).
    let limit: Int?
    private let count = Atomic<Int>(0)

    init(limit: Int?) { self.limit = limit }

    /// The refusal of a limit below 1 (`EINVAL` naming `option`), or nil: checked at each server's
    /// door, before anything is bound. Such a server would accept every client only to reset it,
    /// and `listen` (which sends connections only) would say nothing at all.
    static func refusal(of limit: Int?, option: String, context: String) -> UVError? {
        guard let limit, limit < 1 else { return nil }
        return UVError(code: UVError.invalidArgumentCode,
                       message: "\(option) must be at least 1, or nil for no limit (got \(limit)): a server with it would turn every client away",
                       context: context)
    }

    /// The connections open now.
    var open: Int { count.load(ordering: .relaxed) }

    /// Counts one more connection, unless the limit is reached.
    func take() -> Bool {
        guard let limit else {
            count.wrappingAdd(1, ordering: .relaxed)
            return true
        }
        var current = count.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = count.compareExchange(expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// A connection taken with `take()` has ended.
    func give(_ connections: Int = 1) {
        count.wrappingSubtract(connections, ordering: .relaxed)
    }
}

/// The connections a listening stream accepted: taking one from libuv, the connection
/// limit, and ending them all. One copy for every listener (TCP and Unix-domain sockets),
/// which differ only in how they listen and what they tell their subscriber.
///
/// Loop thread only; held (strongly) by its listener, and the accepted streams' owner.
final class AcceptedStreams: StreamConnectionOwner {
    /// What `accept` did with a pending connection that libuv handed over.
    /// Not generic over what a refusal tells: a generic enum made every accept look its metadata up.
    enum Outcome {
        /// Kept: the stream is open and owned here until it ends.
        case accepted(StreamConnection)
        /// Turned away by the limit (already closed; reset when asked); `open` were open; the peer's address for TCP.
        case refused(peer: SocketAddress?, open: Int)
    }

    /// The limit and the count of open connections (shared by a group's listeners).
    private let budget: ConnectionBudget
    /// The open connections, until each ends (`streamDidEnd`) or `endAll`; each holds one unit of
    /// `budget`. A list through the streams' own `acceptedLinks` (no hashing, no table to grow):
    /// unretained, as the loop's list of open handles is, because a stream is kept alive by its
    /// handle until it closes, and leaves this list when it ends (`end` tells its owner first).
    private var streams = IntrusiveList<AcceptedStreamList>()
    /// How many are in the list.
    var count: Int { streams.count }

    /// Called once when the last open connection ends, while a drain waits for that (`whenEmpty`).
    private var onEmpty: (() -> Void)?
    /// The owner link every stream kept here shares (`StreamConnection.ownerLink`): one per listener.
    private lazy var link = StreamOwnerLink(self)

    init(budget: ConnectionBudget) {
        self.budget = budget
    }

    /// The open connections, for a scan (the idle check); ending one while iterating is safe (a copy).
    var open: [StreamConnection] { Array(streams) }

    private func insert(_ stream: StreamConnection) {
        streams.insert(stream)
    }

    /// Unlinks `stream`; false when it was not in the list (turned away, or already taken by `endAll`).
    private func remove(_ stream: StreamConnection) -> Bool {
        streams.removeIfPresent(stream)
    }

    /// Calls `body` once, when no connection is open: now if none is, else when the last one ends.
    func whenEmpty(_ body: @escaping () -> Void) {
        if count == 0 {
            body()
        } else {
            onEmpty = body
        }
    }

    /// Takes the connection libuv says is pending on `listener` into a stream `makeStream`
    /// builds and `didAccept` prepares, then keeps it or turns it away; a refusal reads what
    /// the listener tells of it (`refusalDetails`, before the stream closes, so it can name the peer).
    ///
    /// - Returns: What happened, or nil when there was nothing to take (the error concerns
    ///   that one connection; it is reported and the listener goes on, as libuv copes with
    ///   `EMFILE` itself).
    func accept(
        status: Int32,
        from listener: UnsafeMutablePointer<uv_stream_t>,
        place: @autoclosure () -> String,
        resetRefused: Bool,
        makeStream: () -> StreamConnection,
        didAccept: (StreamConnection) -> Void,
        refusalDetails: (StreamConnection) -> SocketAddress?
    ) -> Outcome? {
        guard uvCheckReporting(status, "accepting a connection on \(place())") else { return nil }
        let stream = makeStream()
        do {
            try stream.open()
            try uvCheck(uv_accept(listener, stream.uvStream), "uv_accept")
        } catch {
            stream.end(.closed)
            reportMisuse("a connection could not be accepted on \(place()): \(error)")
            return nil
        }
        didAccept(stream)
        guard budget.take() else {
            let read = refusalDetails(stream)
            // Accepted only to be turned away: a TCP reset tells the client at once and
            // leaves no TIME_WAIT state here.
            stream.end(.closed, reset: resetRefused)
            return .refused(peer: read, open: budget.open)
        }
        stream.ownerLink = link
        insert(stream)
        return .accepted(stream)
    }

    /// Keeps an open stream whose connection another loop accepted and counted against the
    /// budget already (a Unix-socket group server's hand-off): from here it is owned here.
    func adopt(_ stream: StreamConnection) {
        stream.ownerLink = link
        insert(stream)
    }

    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {
        if remove(stream) { budget.give() }
        if count == 0, let onEmpty {
            self.onEmpty = nil
            onEmpty()
        }
    }

    /// Ends every open connection (the listener is going away, or a drain's deadline passed),
    /// with a TCP reset when `reset` is set.
    func endAll(_ reason: StreamConnection.EndReason, reset: Bool = false) {
        let open = streams.removeAll()
        budget.give(open.count)
        for stream in open { stream.end(reason, reset: reset) }
        if let onEmpty {
            self.onEmpty = nil
            onEmpty()
        }
    }
}

/// A listener's list of the connections it accepted (`AcceptedStreams`), through `StreamConnection.acceptedLinks`.
enum AcceptedStreamList: IntrusiveListMembership {
    static func withLinks<Result>(of element: StreamConnection, _ body: (inout IntrusiveLinks<StreamConnection>) -> Result) -> Result {
        body(&element.acceptedLinks)
    }
}

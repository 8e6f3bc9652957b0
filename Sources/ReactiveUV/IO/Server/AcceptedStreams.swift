import Synchronization

/// How many connections a server keeps open, against its limit: one per server subscription,
/// shared by the listeners of every loop when it serves on a group, so the limit counts across the group.
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

/// The connections a listener keeps: their owner, the connection limit's count, telling them of a
/// drain (ConnectionDrain.swift), and ending them all.
///
/// Loop thread only; held (strongly) by its listener, and the accepted streams' owner.
final class AcceptedStreams: StreamConnectionOwner {
    /// The limit and the count of open connections (shared by a group's listeners).
    private let budget: ConnectionBudget
    /// The open connections, until each ends (`streamDidEnd`) or `endAll`; each holds one unit of
    /// `budget`. A list through the streams' own `acceptedLinks`, unretained as the loop's list of
    /// open handles is: a stream is kept alive by its handle until it closes, and leaves this list
    /// when it ends (`end` tells its owner first).
    private var streams = IntrusiveList<AcceptedStreamList>()
    /// How many are in the list.
    var count: Int { streams.count }

    /// Called once when the last open connection ends, while a drain waits for that (`whenEmpty`).
    private var onEmpty: (() -> Void)?
    /// The owner link every stream kept here shares (`StreamConnection.ownerLink`): one per listener.
    private lazy var link = StreamOwnerLink(self)
    /// Whether a drain began: every connection kept here was told (`beginDraining`).
    var isDraining = false
    /// The `draining` subscribers of each open connection, until the drain tells them or the connection ends.
    var drainWatchers: [ObjectIdentifier: [(id: Int, subscriber: Subscriber<Void>)]] = [:]
    /// The next `draining` subscriber's id (for its disposal).
    var nextDrainWatcherID = 0

    init(budget: ConnectionBudget) {
        self.budget = budget
    }

    /// The open connections, for a scan (the idle check); ending one while iterating is safe (a copy).
    var open: [StreamConnection] { Array(streams) }

    /// Calls `body` once, when no connection is open: now if none is, else when the last one ends.
    func whenEmpty(_ body: @escaping () -> Void) {
        if count == 0 {
            body()
        } else {
            onEmpty = body
        }
    }

    /// Keeps an open connection already counted against the budget: from here it is owned here.
    func keep(_ stream: StreamConnection) {
        stream.ownerLink = link
        streams.insert(stream)
    }

    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {
        if streams.removeIfPresent(stream) { budget.give() }
        if !drainWatchers.isEmpty { endDrainWatchers(of: stream) }
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

internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore

// Short writes (`shortWritePerMille`): the peer's kernel takes a drawn part of a write at once and
// the rest as its window opens, a latency at a time, as libuv's write queue meets a full socket
// buffer. The untaken bytes are the stream's `queuedByteCount` (its backpressure sees them); a
// write is called back once its last byte is taken, later writes and FIN wait behind it, a close
// cancels what was not taken (`ECANCELED`) and a reset fails it (`ECONNRESET`).
extension SimulatedStreamEnd {
    /// Keeps `rest` of the newest write for the peer's next window.
    func holdBack(_ rest: ArraySlice<UInt8>) {
        backlog.append(rest)
        backlogBytes += rest.count
        if windowTimer == nil { openWindowLater() }
    }

    private func openWindowLater() {
        windowTimer = loop.schedule(after: latency) { [self] in
            windowTimer = nil
            takeBacklog()
        }
    }

    /// The peer's window opened: it takes the backlog in order until a drawn short take.
    private func takeBacklog() {
        guard !isClosed else { return }
        while let head = backlog.first {
            let taken = loop.simulatedNetwork?.writeSize(head.count) ?? head.count
            transmit(head.prefix(taken))
            backlogBytes -= taken
            if taken < head.count {
                backlog[0] = head.dropFirst(taken)
                return openWindowLater()
            }
            backlog.removeFirst()
            loop.execute { [self] in finishOldestWrite() }
        }
        let passes = passesAfterBacklog
        passesAfterBacklog = []
        for (message, passed) in passes { transmit(message, passing: passed) }
        guard finAfterBacklog else { return }
        finAfterBacklog = false
        sendEnd(reset: false)
        loop.execute { [self] in finishShutdown(status: 0) }
    }

    /// Forgets the untaken bytes (the stream closes); returns how many writes they belonged to.
    func dropBacklog() -> Int {
        windowTimer?.dispose()
        windowTimer = nil
        let untaken = backlog.count
        backlog = []
        backlogBytes = 0
        finAfterBacklog = false
        // Sockets that were to follow the untaken bytes are dropped with them: their peers read EOF.
        let passes = passesAfterBacklog
        passesAfterBacklog = []
        for (_, passed) in passes { passed.end.abandon(reset: false) }
        return untaken
    }

    /// A reset arrived: the writes not wholly taken fail with `status`, after those taken (and a
    /// shutdown waiting behind them with them).
    func failBacklog(_ status: Int32) {
        let waitingFin = finAfterBacklog
        let untaken = dropBacklog()
        guard untaken > 0 else { return }
        loop.execute { [self] in
            for _ in 0..<untaken { finishOldestWrite(status: status) }
            if waitingFin { finishShutdown(status: status) }
        }
    }
}

extension SimulatedNetwork {
    /// How much of a `count`-byte write the peer's kernel takes now: all, or (a short write) a drawn part.
    func writeSize(_ count: Int) -> Int {
        guard count > 1, faults.shortWritePerMille > 0, random() % 1_000 < UInt64(faults.shortWritePerMille) else {
            return count
        }
        return 1 + Int(random() % UInt64(count - 1))
    }
}

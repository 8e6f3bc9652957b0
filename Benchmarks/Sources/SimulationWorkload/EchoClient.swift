import ReactiveUV

/// One client of the simulated echo world: connects, sends its message every `period` (first
/// after `phase`), counts what comes back, and after losing its connection reconnects a backoff later.
///
/// Thread rule: its loop's thread only (a simulation's driving thread, inside that loop's callbacks).
final class EchoClient: @unchecked Sendable {
    // Sendable: every field is touched on `loop`'s callbacks only, all run by the driving thread.

    /// Where the client is in its life; every change goes through `become(_:)`.
    private enum State {
        case idle
        case connecting(connect: any Disposable)
        case open(connect: any Disposable, reading: any Disposable, ticker: (any Disposable)?)
        case waiting(reconnect: (any Disposable)?)
        case stopped
    }

    let loop: EventLoop
    private let tally: EchoTally
    private let message: [UInt8]
    private let period: Duration
    private let phase: Duration
    private var state = State.idle
    /// Counts the connects, so a late callback of an earlier connection changes nothing.
    private var generation = 0

    init(loop: EventLoop, tally: EchoTally, message: [UInt8], period: Duration, phase: Duration) {
        self.loop = loop
        self.tally = tally
        self.message = message
        self.period = period
        self.phase = phase
    }

    /// Connects (again); the connection's callbacks come on `loop`.
    func connect() {
        generation += 1
        let mine = generation
        let connect = TCP.connect(host: "127.0.0.1", port: SimulatedEchoWorld.port).subscribe(
            next: { [self] connection in opened(connection, mine) },
            error: { [self] _ in lost(mine) },
            completed: { [self] in lost(mine) })
        guard case .idle = state else { return connect.dispose() }
        become(.connecting(connect: connect))
    }

    /// Ends everything: the connection (closed), the ticker, a reconnect to come.
    func stop() {
        become(.stopped)
    }

    private func opened(_ connection: TCPConnection, _ mine: Int) {
        guard mine == generation, case .connecting(let connect) = state else { return }
        tally.connects += 1
        let tally = self.tally
        let reading = connection.bytes.subscribe(
            next: { tally.bytesEchoed += $0.count },
            error: { [self] _ in lost(mine) },
            completed: { [self] in lost(mine) })
        let message = self.message
        let ticker = loop.schedule(after: phase, repeatingEvery: period) { connection.send(message) }
        become(.open(connect: connect, reading: reading, ticker: ticker))
    }

    /// The connection failed, ended or was reset: a reconnect after the backoff.
    private func lost(_ mine: Int) {
        guard mine == generation else { return }
        switch state {
        case .connecting, .open:
            tally.connectionsLost += 1
            let reconnect = loop.schedule(after: SimulatedEchoWorld.backoff) { [self] in
                guard case .waiting = state else { return }
                become(.idle)
                connect()
            }
            become(.waiting(reconnect: reconnect))
        case .idle, .waiting, .stopped:
            break
        }
    }

    /// The one place the state changes: what the old state held and the new one does not is disposed.
    private func become(_ next: State) {
        let old = state
        state = next
        switch (old, next) {
        case (.connecting, .open), (.idle, _):
            break
        case (.connecting(let connect), _):
            connect.dispose()
        case (.open(let connect, let reading, let ticker), _):
            ticker?.dispose()
            reading.dispose()
            connect.dispose()
        case (.waiting(let reconnect), _):
            if case .waiting = next { break }
            reconnect?.dispose()
        case (.stopped, _):
            break
        }
    }
}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import Synchronization
import XCTest

/// Four loops meeting and ending at random, from a seed.
///
/// Each round starts four loops. Driver threads make thousands of subscriptions
/// homed on random loops (or on `EventLoop.shared`, when made on the driver
/// thread) to subjects fed from other loops and threads, interval timers and
/// TCP connections living on other loops, and calls to actors whose executor is
/// a loop; some go through `subscribe(on:)` and `deliver(on:)` hops. They
/// dispose them from their own thread, from random loops and from the
/// subscriptions' own callbacks, call the actors from tasks, while another
/// thread shuts the loops down in random order, some from another loop's
/// thread, with traffic still flowing.
///
/// Checked: nothing hangs (a watchdog prints every thread's stack and aborts);
/// no callback runs or begins once `disposeAndWait()`, awaited for a thread
/// that is no loop's, returned; callbacks run on their loop; every teardown runs on its home loop
/// thread, or after that loop has closed, and exactly once; actors run on their
/// loop (or after it closed), one job at a time; every shutdown reports
/// `uv_loop_close` == 0; every subscription's objects and every loop are freed;
/// the live heap returns to its level after the first round.
///
/// `CHAOS_SEED` replays a run (the seed is printed at the start and in every
/// failure); `STRESS_SCALE` (or `CHAOS_OPS`, `CHAOS_ROUNDS`) sizes it;
/// `CHAOS_WATCHDOG_SECONDS` (default 120) is the hang deadline per round.
final class CrossLoopChaosTests: XCTestCase {
    func testFourLoopsWithCrossLoopTrafficDisposalsAndShutdownsInRandomOrder() throws {
        let seed = chaosSeed()
        let rounds = environmentInt("CHAOS_ROUNDS", default: 4)
        let operations = environmentInt("CHAOS_OPS", default: scaled(1_000, minimum: 20))
        let deadline = Duration.seconds(environmentInt("CHAOS_WATCHDOG_SECONDS", default: 120))
        let replay = "seed \(seed) (replay: CHAOS_SEED=\(seed) STRESS_SCALE=\(stressScale) swift test --filter CrossLoopChaosTests)"
        print("CrossLoopChaosTests: \(replay); \(rounds) rounds of \(ChaosRound.driverCount) drivers x \(operations) operations")
        var random = ChaosRandom(seed: seed)
        var heapAfterFirstRound = 0
        let started = SchedulerInstant.now
        for round in 0..<rounds {
            let ledger = ChaosLedger()
            var (problems, left) = runRound(round, random: random.fork(), operations: operations, ledger: ledger,
                                            watchdog: "CrossLoopChaosTests round \(round), \(replay)", deadline: deadline)
            problems += left.stillAlive()
            if !problems.isEmpty {
                problems.append("alive: \(ledger.echoConnections.current) echo-side connection subscriptions, "
                                + "\(ledger.asyncOperations.current) Signal.async operations")
            }
            let violations = ledger.violations
            XCTAssertEqual(violations.count, 0, """
                round \(round), \(replay): \(violations.count) invariant(s) broken; the first:
                \(violations.first.joined(separator: "\n"))
                counts: \(ledger.summary)
                """)
            for problem in problems { XCTFail("round \(round), \(replay): \(problem)") }
            print("CrossLoopChaosTests round \(round): \(ledger.summary); live heap \(mebibytes(liveHeapBytes()))")
            if round == 0 { heapAfterFirstRound = liveHeapBytes() }
            if !violations.first.isEmpty || !problems.isEmpty { break }
        }
        let growth = liveHeapBytes() - heapAfterFirstRound
        print("CrossLoopChaosTests: \(formatted(SchedulerInstant.now - started)); live heap after the last round "
              + "\(growth >= 0 ? "+" : "-")\(mebibytes(abs(growth))) against the first")
        // Every round frees what it made (checked above, object by object); what stays is
        // the runtime's and EventLoop.shared's caches, which do not grow with rounds.
        XCTAssertLessThan(growth, 1 << 20, "\(replay): the live heap grew by \(mebibytes(growth)) over \(rounds - 1) rounds")
    }
}

/// Runs one round under a watchdog; returns its problems and weak references to what it made.
private func runRound(_ round: Int, random: ChaosRandom, operations: Int, ledger: ChaosLedger,
                      watchdog what: String, deadline: Duration) -> ([String], LeftBehind) {
    let chaos = ChaosRound(index: round, random: random, operations: operations, ledger: ledger)
    let watchdog = Watchdog(what, deadline: deadline) { chaos.describe() }
    let problems = chaos.run()
    watchdog.disarm()
    return (problems, LeftBehind(chaos))
}

/// One round: four loops, their fixtures, the driver threads and the shutter.
final class ChaosRound: @unchecked Sendable {
    // Immutable after init except: `statuses`, `leftovers`, `shutdowns` (locked), the atomics, and
    // `random`, which only the test thread touches (each other thread gets a fork of its own).
    static let driverCount = 3
    static let loopCount = 4

    let index: Int
    let ledger: ChaosLedger
    let loops: [EventLoop]
    let subjects: [Subject<Int>]
    let actors: [LoopActor]
    private var random: ChaosRandom
    private let operations: Int
    private let progress = Atomic<Int>(0)
    private let driversDone = Atomic<Int>(0)
    private let senderRunning = Atomic<Bool>(true)
    private let senderDone = Atomic<Bool>(false)
    private let shutterDone = Atomic<Bool>(false)
    private let serverPort = Atomic<Int>(0)
    /// What each thread of the round is doing, for the watchdog.
    private let statuses = Locked<[String: String]>([:])
    /// Probes the drivers did not dispose, and the loops' shutdown reports (or errors).
    private let leftovers = Locked<[Probe]>([])
    private let shutdowns = Locked<[Int: String]>([:])
    private let payload = [UInt8](repeating: 0x5A, count: 48)

    init(index: Int, random: ChaosRandom, operations: Int, ledger: ChaosLedger) {
        self.index = index
        self.random = random
        self.operations = operations
        self.ledger = ledger
        loops = (0..<ChaosRound.loopCount).map { EventLoop(name: "chaos\(index)-\($0)") }
        subjects = (0..<ChaosRound.loopCount).map { _ in Subject<Int>() }
        actors = loops.map { LoopActor(loop: $0, ledger: ledger) }
    }

    /// Runs the round; returns problems found at its end (violations go to the ledger).
    func run() -> [String] {
        var problems: [String] = []
        // Subjects fed from their loops' timers and from a foreign thread.
        let feeders = loops.indices.compactMap { index in
            loops[index].schedule(after: .milliseconds(1), repeatingEvery: .milliseconds(1)) { [subjects] in
                subjects[index].sendNext(index)
            }
        }
        startSender()
        // An echo server on one loop, its subscription homed on EventLoop.shared.
        let serverLoop = loops[random.int(0..<loops.count)]
        let server = TCPServer.serve(port: 0, on: serverLoop).subscribe(next: { [self] event in
            switch event {
            case .listening(let address): serverPort.store(address.port, ordering: .releasing)
            case .accepted(let connection):
                let token = LiveToken(ledger.echoConnections)
                _ = connection.bytes.subscribe(next: { bytes in withExtendedLifetime(token) { connection.send(bytes) } })
            case .refused, .draining: break
            }
        })
        setStatus("test thread", "waiting for the echo server to listen")
        spin { serverPort.load(ordering: .acquiring) != 0 }

        for driver in 0..<ChaosRound.driverCount {
            let driverRandom = random.fork()
            spawn("chaos-driver-\(driver)") { self.drive(driver, random: driverRandom) }
        }
        let shutterRandom = random.fork()
        spawn("chaos-shutter") { self.shutLoopsDown(random: shutterRandom) }

        setStatus("test thread", "waiting for the drivers")
        spin { driversDone.load(ordering: .acquiring) == ChaosRound.driverCount }
        senderRunning.store(false, ordering: .relaxed)
        setStatus("test thread", "waiting for the sender and the shutter")
        spin { senderDone.load(ordering: .acquiring) }
        spin { shutterDone.load(ordering: .acquiring) }
        setStatus("test thread", "shutting the remaining loops down")
        for index in loops.indices.shuffled(using: &random) where shutdowns.current[index] == nil {
            record(shutdownOf: index) { try loops[index].tryShutdown() }
        }
        for (index, outcome) in shutdowns.current.sorted(by: { $0.key < $1.key }) where outcome != "uv_loop_close 0" {
            problems.append("loop '\(loops[index].name)': \(outcome)")
        }

        // Every loop has closed: what is left is disposed here, on a thread that is no loop's.
        setStatus("test thread", "disposing what the drivers left")
        server.dispose()
        for feeder in feeders { feeder.dispose() }
        for probe in leftovers.withLock({ list in defer { list = [] }; return list }) {
            _ = probe.disposeFromForeignThread(ledger)
        }
        setStatus("test thread", "waiting for tasks calling actors")
        spin { ledger.outstandingTasks.load(ordering: .acquiring) == 0 }
        // Teardowns of subscriptions homed on EventLoop.shared run there; the rest ran already.
        waitBounded("every attached subscription's teardown", problems: &problems) {
            ledger.tornDown.load(ordering: .acquiring) >= ledger.attached.load(ordering: .acquiring)
        }
        if ledger.tornDown.load(ordering: .acquiring) != ledger.attached.load(ordering: .acquiring) {
            problems.append("\(ledger.attached.load(ordering: .acquiring)) subscriptions attached but "
                            + "\(ledger.tornDown.load(ordering: .acquiring)) teardowns ran")
        }
        waitBounded("every subscription's callbacks and probe to be freed", problems: &problems) {
            ledger.liveProbes.load(ordering: .acquiring) == 0
        }
        for label in ledger.liveProbeLabels.prefix(10) { problems.append("still alive: the subscription \(label)") }
        return problems
    }

    // MARK: - threads

    /// A driver: subscribes, disposes and calls actors at random.
    private func drive(_ driver: Int, random: ChaosRandom) {
        var random = random
        let name = "driver \(driver)"
        var live: [Probe] = []
        for operation in 0..<operations {
            let roll = random.int(0..<100)
            if roll < 55 || live.isEmpty {
                setStatus(name, "operation \(operation): subscribing")
                if let probe = subscribe(random: &random, id: driver * operations + operation) { live.append(probe) }
            } else if roll < 85 {
                let probe = live.remove(at: random.int(0..<live.count))
                setStatus(name, "operation \(operation): disposing \(probe.label)")
                dispose(probe, random: &random)
            } else {
                setStatus(name, "operation \(operation): calling an actor")
                callActor(random: &random)
            }
            progress.add(1, ordering: .relaxed)
            // Pacing, not synchronization: spreads the operations over time so timers fire,
            // ping-pongs run and loops close while subscriptions come and go.
            usleep(UInt32(random.int(0..<2_000)))
        }
        setStatus(name, "done")
        leftovers.withLock { $0.append(contentsOf: live) }
        driversDone.add(1, ordering: .releasing)
    }

    /// Sends to random subjects from a thread that is no loop's (paced, so the hops stay bounded).
    private func startSender() {
        let senderRandom = random.fork()
        spawn("chaos-sender") { [self] in
            var random = senderRandom
            var sent = 0
            while senderRunning.load(ordering: .relaxed) {
                subjects[random.int(0..<subjects.count)].sendNext(sent)
                sent += 1
                usleep(20)
            }
            senderDone.store(true, ordering: .releasing)
        }
    }

    /// Shuts some loops down while the drivers run, in random order, at random points.
    private func shutLoopsDown(random: ChaosRandom) {
        var random = random
        let total = operations * ChaosRound.driverCount
        let order = loops.indices.shuffled(using: &random)
        let early = random.int(1..<(loops.count + 1))
        let points = (0..<early).map { _ in random.int(0..<total) }.sorted()
        for (index, point) in zip(order.prefix(early), points) {
            setStatus("shutter", "waiting for operation \(point) to shut '\(loops[index].name)' down")
            spin {
                progress.load(ordering: .relaxed) >= point || driversDone.load(ordering: .acquiring) == ChaosRound.driverCount
            }
            let others = loops.indices.filter { $0 != index && !loops[$0].isShutDown }
            if random.percent(50), let other = others.randomElement(using: &random) {
                // Asked from another loop's thread: shutdown() starts it there and returns without waiting.
                setStatus("shutter", "shutting '\(loops[index].name)' down from loop '\(loops[other].name)'")
                let target = loops[index]
                do {
                    try loops[other].tryExecute { target.shutdown() }
                } catch {
                    ledger.refusedSubmissions.add(1, ordering: .relaxed)
                }
            }
            setStatus("shutter", "waiting for '\(loops[index].name)' to close")
            record(shutdownOf: index) { try loops[index].tryShutdown() }
        }
        setStatus("shutter", "done")
        shutterDone.store(true, ordering: .releasing)
    }

    private func record(shutdownOf index: Int, _ shutdown: () throws -> ShutdownReport) {
        let outcome: String
        do {
            let report = try shutdown()
            outcome = "uv_loop_close \(report.loopCloseResult)"
        } catch {
            outcome = "shutdown failed: \(error)"
        }
        ledger.loopShutdowns.add(1, ordering: .relaxed)
        shutdowns.withLock { $0[index] = outcome }
    }

    // MARK: - operations

    /// Builds a random source and hops, and subscribes on a random loop or on this thread.
    private func subscribe(random: inout ChaosRandom, id: Int) -> Probe? {
        let (source, description) = makeSource(random: &random)
        let onLoop = random.percent(80)
        let home = onLoop ? loops[random.int(0..<loops.count)] : EventLoop.shared
        var callbackLoop = home
        var hops = ""
        var subscribeOn: EventLoop?, deliverOn: EventLoop?
        if random.percent(25) {
            subscribeOn = loops[random.int(0..<loops.count)]
            callbackLoop = subscribeOn!
            hops += " subscribe(on: \(subscribeOn!.name))"
        }
        if random.percent(25) {
            deliverOn = loops[random.int(0..<loops.count)]
            callbackLoop = deliverOn!
            hops += " deliver(on: \(deliverOn!.name))"
        }
        let probe = Probe(id: id, label: "#\(id) \(description)\(hops) homed on \(home.name)",
                          callbackLoop: callbackLoop, selfDisposeAfter: random.percent(10) ? random.int(1..<4) : 0,
                          ledger: ledger)
        var signal = probed(source, probe)
        if let subscribeOn { signal = signal.subscribe(on: subscribeOn) }
        if let deliverOn { signal = signal.deliver(on: deliverOn) }
        ledger.subscribes.add(1, ordering: .relaxed)
        let subscribe: @Sendable () -> Void = { [signal] in
            probe.subscribed(signal.subscribe(
                next: { _ in probe.callbackBegins("next") },
                error: { _ in probe.callbackBegins("error") },
                completed: { probe.callbackBegins("completed") }))
        }
        guard onLoop else {
            subscribe()
            return probe
        }
        do {
            try home.tryExecute(subscribe)
        } catch {
            ledger.refusedSubmissions.add(1, ordering: .relaxed)
            return nil
        }
        return probe
    }

    /// A subject fed from another loop, an interval or a TCP connection on some loop, or an actor call.
    private func makeSource(random: inout ChaosRandom) -> (Signal<Int>, String) {
        let loopIndex = random.int(0..<loops.count)
        let loop = loops[loopIndex]
        switch random.int(0..<100) {
        case 0..<40:
            return (subjects[loopIndex], "subject fed by \(loop.name)")
        case 40..<70:
            let period = random.int(1..<5)
            return (Signal<Int>.interval(.milliseconds(period), on: loop), "interval(\(period) ms) on \(loop.name)")
        case 70..<85:
            let port = serverPort.load(ordering: .acquiring)
            let payload = self.payload
            // A ping-pong: what the echo server returns is sent again, until disposed.
            let exchange = TCP.connect(host: "127.0.0.1", port: port, on: loop).flatMap { connection -> Signal<Int> in
                connection.send(payload)
                return connection.bytes.doNext { connection.send($0) }.map { $0.count }
            }
            return (exchange, "TCP ping-pong from \(loop.name)")
        default:
            let actor = actors[loopIndex]
            let counter = ledger.asyncOperations
            let call = Signal<Int>.async {
                let token = LiveToken(counter)
                let value = await actor.bump()
                withExtendedLifetime(token) {}
                return value
            }
            return (call, "Signal.async calling the actor on \(loop.name)")
        }
    }

    /// Disposes from this thread, from a random loop, or not at all (the round's end will).
    private func dispose(_ probe: Probe, random: inout ChaosRandom) {
        switch random.int(0..<100) {
        case 0..<50:
            if !probe.disposeFromForeignThread(ledger) { leftovers.withLock { $0.append(probe) } }
        case 50..<85:
            let loop = loops[random.int(0..<loops.count)]
            do {
                try loop.tryExecute { [ledger] in
                    probe.disposeOnLoop()
                    ledger.loopDisposes.add(1, ordering: .relaxed)
                }
            } catch {
                ledger.refusedSubmissions.add(1, ordering: .relaxed)
                leftovers.withLock { $0.append(probe) }
            }
        default:
            leftovers.withLock { $0.append(probe) }
        }
    }

    /// Calls a random loop's actor from a task on the global pool or on another loop.
    private func callActor(random: inout ChaosRandom) {
        let actor = actors[random.int(0..<actors.count)]
        let ledger = self.ledger
        ledger.outstandingTasks.add(1, ordering: .relaxed)
        ledger.actorCalls.add(1, ordering: .relaxed)
        if random.percent(50) {
            Task {
                _ = await actor.bump()
                ledger.outstandingTasks.subtract(1, ordering: .releasing)
            }
        } else {
            let executor = loops[random.int(0..<loops.count)]
            Task(executorPreference: executor) {
                _ = await actor.bump()
                ledger.outstandingTasks.subtract(1, ordering: .releasing)
            }
        }
    }

    // MARK: - waiting and reporting

    private func setStatus(_ thread: String, _ status: String) {
        statuses.withLock { $0[thread] = status }
    }

    /// Waits with no deadline of its own: the watchdog bounds the round.
    private func spin(_ condition: () -> Bool) {
        while !condition() { usleep(1_000) }
    }

    /// Waits up to 30 s for something that must happen without any thread being stuck; a leak, not a hang.
    private func waitBounded(_ what: String, problems: inout [String], _ condition: () -> Bool) {
        do {
            try waitFor(what, timeout: .seconds(30), observed: ledger.summary, condition)
        } catch {
            problems.append("\(error)")
        }
    }

    /// The round's state for the watchdog: each loop, each thread's step, the counters.
    func describe() -> String {
        var lines = ["round \(index): \(ledger.summary)"]
        let answered = Locked<Set<Int>>([])
        for (index, loop) in loops.enumerated() where !loop.isShutDown {
            do {
                try loop.tryExecute { answered.withLock { _ = $0.insert(index) } }
            } catch {
                lines.append("loop '\(loop.name)' refused a ping: \(error)")
            }
        }
        let deadline = SchedulerInstant.now + .seconds(2)
        while SchedulerInstant.now < deadline
                && loops.indices.contains(where: { !loops[$0].isShutDown && !answered.current.contains($0) }) {
            usleep(1_000)
        }
        for (index, loop) in loops.enumerated() {
            let state = loop.isShutDown ? "closed" : answered.current.contains(index)
                ? "running, answered a ping" : "NOT CLOSED AND DID NOT ANSWER A PING WITHIN 2 s (blocked?)"
            lines.append("loop '\(loop.name)': \(state); \(loop.queuedWorkCount) items queued; "
                         + "shutdown: \(shutdowns.current[index] ?? "not finished")")
        }
        for (thread, status) in statuses.current.sorted(by: { $0.key < $1.key }) { lines.append("\(thread): \(status)") }
        return lines.joined(separator: "\n")
    }
}

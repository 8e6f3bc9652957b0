import Foundation
import ReactiveUV
import Synchronization
import XCTest

/// A million subscribe/dispose cycles (`STRESS_SCALE` scales it, to at least 20,000) on one Subject, split across two loop threads,
/// while a third thread sends without pause: no crash, and no value reaches a
/// subscriber after its `dispose()` returned.
final class SubjectStressTests: XCTestCase {
    /// One loop's cycles: cycle `i` subscribes, lets the sender race it, then disposes.
    private final class Cycles: @unchecked Sendable {
        // All state is atomic: callbacks run on the loop thread, the checks on the test thread.
        /// The newest cycle whose dispose() returned.
        let disposedThrough = Atomic<Int>(-1)
        let deliveredAfterDispose = Atomic<Int>(0)
        let delivered = Atomic<Int>(0)
        let finished = Atomic<Bool>(false)
    }

    func testAMillionSubscribeDisposeCyclesAcrossTwoThreadsDeliverNothingAfterDispose() {
        let total = scaled(1_000_000, minimum: 20_000), chunk = 10_000
        let subject = Subject<Int>()
        let loops = [EventLoop(name: "stress-a"), EventLoop(name: "stress-b")]
        defer { for loop in loops { loop.shutdown() } }
        let sending = Atomic<Bool>(true)
        let sent = Atomic<Int>(0)
        let senderDone = Atomic<Bool>(false)
        let sender = Thread {
            var value = 0
            while sending.load(ordering: .relaxed) {
                subject.sendNext(value)
                value += 1
                // Paced: each send to a live subscriber queues a hop to its loop, and the
                // loops are busy with cycles; unpaced, that queue would grow by millions.
                usleep(10)
            }
            sent.store(value, ordering: .releasing)
            senderDone.store(true, ordering: .releasing)
        }
        sender.start()

        let started = SchedulerInstant.now
        let perLoop = total / loops.count
        let cycles = loops.map { _ in Cycles() }
        for (loop, state) in zip(loops, cycles) {
            // In chunks, so values hopped to this loop for disposed subscribers get their
            // chance to (wrongly) run between chunks.
            @Sendable func run(from start: Int) {
                for cycle in start..<min(start + chunk, perLoop) {
                    let subscription = subject.subscribeNext { _ in
                        state.delivered.add(1, ordering: .relaxed)
                        if state.disposedThrough.load(ordering: .acquiring) >= cycle {
                            state.deliveredAfterDispose.add(1, ordering: .relaxed)
                        }
                    }
                    subscription.dispose()
                    state.disposedThrough.store(cycle, ordering: .releasing)
                }
                if start + chunk < perLoop {
                    loop.execute { run(from: start + chunk) }
                } else {
                    state.finished.store(true, ordering: .releasing)
                }
            }
            loop.execute { run(from: 0) }
        }
        let deadline = SchedulerInstant.now + .seconds(120)
        while !cycles.allSatisfy({ $0.finished.load(ordering: .acquiring) }) && SchedulerInstant.now < deadline {
            usleep(10_000)
        }
        sending.store(false, ordering: .relaxed)
        while !senderDone.load(ordering: .acquiring) { usleep(1_000) }
        // Whatever was queued for the loops runs before the counts are read.
        for loop in loops {
            let drained = Atomic<Bool>(false)
            loop.execute { drained.store(true, ordering: .releasing) }
            while !drained.load(ordering: .acquiring) { usleep(1_000) }
        }
        let elapsed = SchedulerInstant.now - started
        XCTAssertTrue(cycles.allSatisfy { $0.finished.load(ordering: .acquiring) }, "the cycles did not finish within 120 s")
        XCTAssertEqual(cycles.map { $0.disposedThrough.load(ordering: .acquiring) }, [perLoop - 1, perLoop - 1])
        XCTAssertEqual(cycles.map { $0.deliveredAfterDispose.load(ordering: .acquiring) }, [0, 0],
                       "values reached subscribers after dispose() returned")
        let delivered = cycles.map { $0.delivered.load(ordering: .acquiring) }
        print("stress: \(total) subscribe/dispose cycles on 2 loop threads in \(elapsed) while \(sent.load(ordering: .acquiring)) values were sent from a third thread; delivered before dispose: \(delivered), after dispose: 0")
    }
}

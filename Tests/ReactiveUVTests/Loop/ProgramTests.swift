import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `Program`: waiting for work on other loops from the main thread, the exit status, the group's
/// shutdown, and drain requests from termination signals.
final class ProgramTests: XCTestCase {
    func testRunReturnsZeroOnceTheWorkCompletesAndShutsTheGroupDown() {
        let group = EventLoopGroup(loopCount: 2, name: "program-ok")
        let work = Signal<Void>.timer(after: .milliseconds(20), on: group.loops[1])
        XCTAssertEqual(Program.run(work, shuttingDown: group), 0)
        XCTAssertTrue(group.loops.allSatisfy(\.isShutDown), "the group is shut down when run returns")
    }

    func testRunReturnsOneWhenTheWorkFails() {
        let group = EventLoopGroup(loopCount: 1, name: "program-fail")
        let work = Signal<Void>.timer(after: .milliseconds(5), on: group.loops[0])
            .concat(Signal<Void>.error(UVError(code: UVError.invalidArgumentCode, context: "the test's work")))
        XCTAssertEqual(Program.run(work, shuttingDown: group), 1)
        XCTAssertTrue(group.loops[0].isShutDown)
    }

    func testRunOnALoopThreadRefusesToWait() {
        let group = EventLoopGroup(loopCount: 1, name: "program-loop")
        defer { group.shutdown() }
        let status = Locked<Int32?>(nil)
        // A signal that never ends: waiting for it on the loop would stop the loop for good.
        group.loops[0].execute { status.withLock { $0 = Program.run(Signal<Void>.never) } }
        waitUntil("run on the loop thread to return") { status.current != nil }
        XCTAssertEqual(status.current, 70)
    }

    func testTheAsyncFormReturnsTheStatusAndShutsTheGroupDown() async {
        let group = EventLoopGroup(loopCount: 1, name: "program-async")
        let work = Signal<Void>.timer(after: .milliseconds(5), on: group.loops[0]).map { _ in 1 }
        let status = await Program.wait(for: work, shuttingDown: group)
        XCTAssertEqual(status, 0)
        XCTAssertTrue(group.loops[0].isShutDown)
        let failing = EventLoopGroup(loopCount: 1, name: "program-async-fail")
        let failed = await Program.wait(for: Signal<Void>.error(UVError(code: UVError.invalidArgumentCode, context: "the test's work")), shuttingDown: failing)
        XCTAssertEqual(failed, 1)
    }

    func testDrainOnTerminationAsksGracefullyThenForcesThenCompletes() throws {
        let report = LoopHarness.run { harness in
            let recorder = try harness.record(Program.drainOnTermination(timeout: .seconds(3), signals: [SIGUSR2]))
            try harness.wait(for: "the signal handle") { (try? harness.loop.openHandles().count) == 1 }
            kill(getpid(), SIGUSR2)
            _ = try recorder.waitForValues(1)
            kill(getpid(), SIGUSR2)
            let end = try recorder.waitForTermination()
            XCTAssertEqual(recorder.values, [.graceful(timeout: .seconds(3)), .force])
            if case .completed = end {} else { XCTFail("it completes after the second request, not \(end)") }
            _ = try harness.onLoop {}
            XCTAssertEqual(try harness.loop.openHandles(), [], "the signal handle closed with it")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }

    func testDrainOnTerminationWithNoSignalFailsWithEINVAL() throws {
        XCTAssertThrowsError(try Program.drainOnTermination(signals: []).waitUntilCompleted(timeout: LoopHarness.defaultTimeout)) { error in
            XCTAssertEqual((error as? UVError)?.code, UVError.invalidArgumentCode, "\(error)")
        }
    }

    /// `run()` on a loop with nothing scheduled while a group runs returns at once: it says so.
    func testRunWithNothingToDoWhileAGroupRunsSaysWhy() throws {
        let group = EventLoopGroup(loopCount: 1, name: "program-note")
        let waiting = Locked<String?>(nil)
        let busy = Locked<String?>(nil)
        let thread = Thread {
            let loop = EventLoop.onCurrentThread(name: "idle-main")
            waiting.withLock { $0 = loop.nothingToRunNote() }
            let timer = loop.schedule(after: .seconds(3600)) {}
            loop.execute {
                busy.withLock { $0 = loop.nothingToRunNote() ?? "" }
                timer?.dispose()
            }
            loop.run()
            loop.shutdown()
        }
        thread.start()
        waitUntil("the loop thread to look") { busy.current != nil }
        group.shutdown()
        XCTAssertTrue(waiting.current?.contains("Program.run(server, shuttingDown: group)") == true, "\(waiting.current ?? "nil")")
        XCTAssertEqual(busy.current, "", "a loop with a timer has something to do")
    }
}

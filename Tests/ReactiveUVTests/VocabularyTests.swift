import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The public vocabulary of DESIGN.md, spelled exactly as there: outside tests rely on these names.
final class VocabularyTests: XCTestCase {
    func testTheDesignVocabularyCompilesAndBehaves() throws {
        // Loops
        let loop = EventLoop()                  // own thread, running
        _ = EventLoop.shared                    // embedded default loop
        XCTAssertNil(EventLoop.current)         // EventLoop? for the calling thread
        XCTAssertFalse(loop.inEventLoop)        // Bool
        let ran = Locked(false)
        loop.execute { ran.withLock { $0 = true } }
        _ = loop.scheduler                      // the loop's Scheduler
        let group = EventLoopGroup(loopCount: 4)
        _ = group.next()

        // Schedulers
        XCTAssertNil(Scheduler.current)
        _ = Scheduler.immediate
        _ = Scheduler.subscription
        let scheduler = loop.scheduler
        let a: (any Disposable)? = scheduler.schedule { }
        let b: (any Disposable)? = scheduler.schedule(after: .milliseconds(50)) { }
        let c: (any Disposable)? = scheduler.schedule(after: .zero, repeatingEvery: .seconds(1), leeway: .milliseconds(10)) { }
        for disposable in [a, b, c] { disposable?.dispose() }

        // Disposables
        let action = ActionDisposable { }
        let compound = CompoundDisposable()
        let serial = SerialDisposable()
        let scoped = ScopedDisposable(action)
        compound.add(serial)
        compound.dispose()
        XCTAssertTrue(serial.isDisposed)
        scoped.dispose()
        XCTAssertTrue(action.isDisposed)

        // Signals
        let disposed = Locked(false)
        let s = Signal<Int> { subscriber in     // cold, like RACDynamicSignal
            subscriber.sendNext(1)
            subscriber.sendCompleted()
            return ActionDisposable { disposed.withLock { $0 = true } }   // or nil
        }
        let recorder = EventRecorder(s)
        XCTAssertEqual(try recorder.waitForTermination(), .completed)
        XCTAssertEqual(recorder.values, [1])
        let d = s.subscribe(next: { _ in }, error: { _ in }, completed: { })
        s.subscribeNext { _ in }
        d.dispose()
        struct Failure: Error {}
        _ = (Signal.return(1), Signal<Int>.empty, Signal<Int>.never, Signal<Int>.error(Failure()))
        _ = (Subject<Int>(), ReplaySubject<Int>(capacity: 10), BehaviorSubject(initial: 0))

        // Operators (RAC names, Swift spelling)
        let other = Signal.return(2)
        _ = s.map { $0 + 1 }.filter { $0 > 0 }.ignore(3)
        _ = s.bind { { value, _ in Signal.return(value * 2) } }
        _ = s.flatMap { Signal.return($0) }
        _ = s.concat(other)
        _ = s.zip(with: other)
        _ = Signal.zip([s, other])
        _ = s.combineLatest(with: other)
        _ = Signal.combineLatest([s, other])
        _ = s.merge(with: other)
        _ = Signal.merge([s, other])
        _ = Signal<Signal<Int>>.return(s).switchToLatest()
        _ = s.take(1).skip(1).take(until: other).distinctUntilChanged().scan(0, +)
        _ = s.throttle(.milliseconds(1)).delay(.milliseconds(1)).timeout(.seconds(1))
        _ = s.retry(1).catch { _ in other }
        _ = s.deliver(on: loop).subscribe(on: loop)
        _ = s.replay()
        _ = s.publish()

        // I/O factories
        _ = Signal<Void>.timer(after: .milliseconds(1), on: loop)
        _ = Signal<Int>.interval(.milliseconds(1), on: loop)
        let changes: Signal<FileEvent> = FileWatch.changes(at: "/tmp")
        _ = changes
        let connections: Signal<TCPConnection> = TCP.connect(host: "127.0.0.1", port: 9)
        _ = (connections, TCPServer.listen(port: 0))

        // Errors
        let error = UVError(code: UVError.noSuchFileCode)
        XCTAssertEqual([error.name, error.message], ["ENOENT", "no such file or directory"])
        XCTAssertEqual(error.code, UVError.noSuchFileCode)

        waitUntil("the executed work") { ran.current }
        loop.shutdown()
        group.shutdown()
        // The subscriptions above were made off any loop, so they run on EventLoop.shared:
        // the recorder saw `completed` from inside the body, before the body's disposable was
        // returned and disposed on that thread. Wait for it rather than race it.
        waitUntil("the signal's disposable to run") { disposed.current }
    }
}

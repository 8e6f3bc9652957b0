import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

final class DisposableTests: XCTestCase {
    func testActionDisposableRunsOnceAndReleasesItsAction() {
        let count = Locked(0)
        final class Captured: Sendable {}
        weak var weakCaptured: Captured?
        let disposable: ActionDisposable = {
            let captured = Captured()
            weakCaptured = captured
            return ActionDisposable { _ = captured; count.withLock { $0 += 1 } }
        }()
        XCTAssertFalse(disposable.isDisposed)
        XCTAssertNotNil(weakCaptured)
        disposable.dispose()
        disposable.dispose()
        XCTAssertTrue(disposable.isDisposed)
        XCTAssertEqual(count.current, 1)
        XCTAssertNil(weakCaptured, "the action and what it captured are released after it ran")
    }

    func testActionRunsExactlyOnceWhenManyThreadsDisposeAtOnce() {
        let rounds = 2_000
        let count = Locked(0)
        let disposables = (0..<rounds).map { _ in ActionDisposable { count.withLock { $0 += 1 } } }
        let shared = UncheckedBox(disposables)
        runConcurrently(4) { _ in
            for disposable in shared.value { disposable.dispose() }
        }
        XCTAssertEqual(count.current, rounds)
    }

    func testCompoundDisposesChildrenAndRefusesNewcomers() {
        let log = Locked<[String]>([])
        let compound = CompoundDisposable([ActionDisposable { log.withLock { $0.append("a") } }])
        compound.add(ActionDisposable { log.withLock { $0.append("b") } })
        compound.add(nil)
        XCTAssertEqual(compound.count, 2)
        compound.dispose()
        XCTAssertEqual(log.current, ["a", "b"])
        let late = ActionDisposable { log.withLock { $0.append("late") } }
        compound.add(late)
        XCTAssertTrue(late.isDisposed, "adding to a disposed compound disposes the newcomer at once")
        XCTAssertEqual(log.current, ["a", "b", "late"])
        XCTAssertEqual(compound.count, 0)
        compound.dispose()
        XCTAssertEqual(log.current.count, 3)
    }

    func testFinishedChildrenCanBeRemovedSoTheCompoundDoesNotGrow() {
        let compound = CompoundDisposable()
        for _ in 0..<10_000 {
            let child = ActionDisposable {}
            compound.add(child)
            compound.remove(child)
        }
        XCTAssertEqual(compound.count, 0)
        let kept = ActionDisposable {}
        compound.add(kept)
        compound.remove(ActionDisposable {})  // not a child: nothing happens
        XCTAssertEqual(compound.count, 1)
        compound.dispose()
        XCTAssertTrue(kept.isDisposed)
    }

    func testChildrenAddedWhileAnotherThreadDisposesAreEachDisposedExactlyOnce() {
        for _ in 0..<200 {
            let compound = CompoundDisposable()
            let disposedCount = Locked(0)
            let children = (0..<200).map { _ in ActionDisposable { disposedCount.withLock { $0 += 1 } } }
            let box = UncheckedBox(children)
            runConcurrently(3) { thread in
                if thread == 2 {
                    compound.dispose()
                } else {
                    for (index, child) in box.value.enumerated() where index % 2 == thread { compound.add(child) }
                }
            }
            XCTAssertEqual(disposedCount.current, 200, "a child was lost or disposed twice")
        }
    }

    func testCompoundDisposesChildrenOutsideItsLock() {
        let compound = CompoundDisposable()
        let inner = CompoundDisposable()
        // A child whose teardown touches the compound again must not deadlock.
        compound.add(ActionDisposable { compound.add(inner); _ = compound.count })
        compound.dispose()
        XCTAssertTrue(inner.isDisposed)
    }

    func testSerialDisposableReplacesAndDisposesTheOldInner() {
        let first = ActionDisposable {}, second = ActionDisposable {}, third = ActionDisposable {}
        let serial = SerialDisposable(first)
        serial.inner = second
        XCTAssertTrue(first.isDisposed, "setting inner disposes the one it replaces")
        let old = serial.swap(third)
        XCTAssertTrue(old === second)
        XCTAssertFalse(second.isDisposed, "swap hands back the old one undisposed")
        serial.dispose()
        XCTAssertTrue(third.isDisposed)
        XCTAssertNil(serial.inner)
        let late = ActionDisposable {}
        XCTAssertNil(serial.swap(late))
        XCTAssertTrue(late.isDisposed, "swapping in after disposal disposes the newcomer")
    }

    func testSerialDisposableRaceLeavesNothingUndisposed() {
        for _ in 0..<300 {
            let serial = SerialDisposable()
            let candidates = (0..<50).map { _ in ActionDisposable {} }
            let box = UncheckedBox(candidates)
            runConcurrently(2) { thread in
                if thread == 0 {
                    for candidate in box.value { serial.inner = candidate }
                } else {
                    serial.dispose()
                }
            }
            XCTAssertTrue(candidates.allSatisfy(\.isDisposed))
        }
    }

    func testScopedDisposableDisposesWhenReleased() {
        let inner = ActionDisposable {}
        do {
            let scoped = inner.scoped()
            XCTAssertFalse(scoped.isDisposed)
        }
        XCTAssertTrue(inner.isDisposed)
        let explicit = ActionDisposable {}
        let scoped = ScopedDisposable(explicit)
        scoped.dispose()
        XCTAssertTrue(explicit.isDisposed && scoped.isDisposed)
    }
}

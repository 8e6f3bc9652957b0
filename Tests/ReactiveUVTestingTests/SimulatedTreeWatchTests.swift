import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `FileWatch.changes(at:recursive: true)` on a simulated loop: the events the real recursive watch sends
/// (names relative to the root, new subdirectories taken in, removed and moved-out ones let go, one `.moved`
/// for a rename within the tree), on the in-memory tree and virtual time.
final class SimulatedTreeWatchTests: XCTestCase {
    /// Runs `signal` on the simulation's loop until idle and says whether it succeeded.
    private func succeeds<Value>(_ signal: Signal<Value>, _ simulation: Simulation, line: UInt = #line) throws {
        let recorder = try simulation.record(signal)
        simulation.runUntilIdle()
        XCTAssertEqual(recorder.terminal.map { "\($0)" }, "completed", line: line)
    }

    private func make(_ directories: [String], files: [String] = [], _ simulation: Simulation) throws {
        for directory in directories { try succeeds(Files.createDirectory(directory, withParents: true), simulation) }
        for file in files { try succeeds(Files.write([1], to: file), simulation) }
    }

    /// The events after the first `seen`, as descriptions.
    private func described(_ recorder: EventRecorder<FileEvent>, after seen: Int = 0) -> [String] {
        recorder.values.dropFirst(seen).map(\.description)
    }

    func testARecursiveWatchFollowsSubdirectoriesMadeAfterItBeganAndLetsRemovedOnesGo() throws {
        Simulation.check(seed: 91) { simulation in
            try make(["/w/old"], simulation)
            let watch = try simulation.record(FileWatch.changes(at: "/w", recursive: true))
            try succeeds(Files.write([1], to: "/w/old/existing.txt"), simulation)
            XCTAssertEqual(described(watch), ["renamed old/existing.txt", "changed old/existing.txt"])
            XCTAssertEqual(watch.values.first?.path, "/w/old/existing.txt")

            try succeeds(Files.createDirectory("/w/sub"), simulation)
            try succeeds(Files.write([2], to: "/w/sub/new.txt"), simulation)
            try succeeds(Files.chmod("/w/sub", 0o700), simulation)
            XCTAssertEqual(described(watch, after: 2), ["renamed sub", "renamed sub/new.txt", "changed sub/new.txt", "changed sub"],
                           "a subdirectory's own change once, by its parent")

            // A whole tree at once: what was made before its directory's watch existed is announced.
            var seen = watch.values.count
            try succeeds(Files.createDirectory("/w/sub/a/b", withParents: true), simulation)
            try succeeds(Files.write([3], to: "/w/sub/a/b/deep.txt"), simulation)
            XCTAssertEqual(described(watch, after: seen), ["renamed sub/a", "renamed sub/a/b", "renamed sub/a/b/deep.txt",
                                                           "changed sub/a/b/deep.txt"])

            // Removed deepest first, as the real walk removes it; nothing below is watched afterwards.
            seen = watch.values.count
            try succeeds(Files.removeTree("/w/sub"), simulation)
            XCTAssertEqual(described(watch, after: seen), ["renamed sub/a/b/deep.txt", "renamed sub/a/b", "renamed sub/a",
                                                           "renamed sub/new.txt", "renamed sub"])
            // Made again: a new directory, watched anew.
            seen = watch.values.count
            try succeeds(Files.createDirectory("/w/sub"), simulation)
            try succeeds(Files.write([4], to: "/w/sub/again"), simulation)
            XCTAssertEqual(described(watch, after: seen), ["renamed sub", "renamed sub/again", "changed sub/again"])
            XCTAssertNil(watch.terminal)
        }
    }

    func testARenameAcrossTwoDirectoriesOfTheTreeIsOneMovedEventAndTheDirectoryStaysWatched() throws {
        Simulation.check(seed: 92) { simulation in
            try make(["/w/x/sub", "/w/y"], files: ["/w/x/f", "/w/x/sub/inside"], simulation)
            let watch = try simulation.record(FileWatch.changes(at: "/w", recursive: true))
            try succeeds(Files.rename(from: "/w/x/f", to: "/w/y/g"), simulation)
            try succeeds(Files.rename(from: "/w/x/sub", to: "/w/y/sub2"), simulation)
            XCTAssertEqual(described(watch), ["moved x/f -> y/g", "moved x/sub -> y/sub2"])
            XCTAssertEqual(watch.values.first, FileEvent(kind: .moved, name: "y/g", path: "/w/y/g", oldName: "x/f", oldPath: "/w/x/f"))

            try succeeds(Files.write([3], to: "/w/y/sub2/later"), simulation)
            XCTAssertEqual(watch.values.dropFirst(2).first, FileEvent(kind: .renamed, name: "y/sub2/later", path: "/w/y/sub2/later"))
            XCTAssertEqual(described(watch, after: 2), ["renamed y/sub2/later", "changed y/sub2/later"])

            // Renamed within its directory, then renamed back: the names follow, nothing is read again.
            try succeeds(Files.rename(from: "/w/y", to: "/w/z"), simulation)
            try succeeds(Files.write([4], to: "/w/z/sub2/inside", append: true), simulation)
            XCTAssertEqual(described(watch, after: 4), ["moved y -> z", "changed z/sub2/inside"])
            XCTAssertNil(watch.terminal)
        }
    }

    func testADirectoryRenamedOverAnEmptyOneKeepsItsWatchUnderTheName() throws {
        Simulation.check(seed: 93) { simulation in
            try make(["/w/a", "/w/b"], files: ["/w/a/inside"], simulation)
            let watch = try simulation.record(FileWatch.changes(at: "/w", recursive: true))
            try succeeds(Files.rename(from: "/w/a", to: "/w/b"), simulation)
            try succeeds(Files.write([2], to: "/w/b/later"), simulation)
            XCTAssertEqual(described(watch), ["moved a -> b", "renamed b/later", "changed b/later"])
        }
    }

    func testEntriesMovedOutAreDeletionsAndEntriesMovedInAreCreations() throws {
        Simulation.check(seed: 94) { simulation in
            try make(["/w/sub", "/out/d"], files: ["/w/f", "/out/d/inside"], simulation)
            let watch = try simulation.record(FileWatch.changes(at: "/w", recursive: true))
            try succeeds(Files.rename(from: "/w/f", to: "/out/f"), simulation)
            try succeeds(Files.rename(from: "/w/sub", to: "/out/sub"), simulation)
            try succeeds(Files.write([1], to: "/out/sub/unwatched"), simulation)
            XCTAssertEqual(described(watch), ["renamed f", "renamed sub"], "the moved-out directory is no longer watched")

            try succeeds(Files.rename(from: "/out/d", to: "/w/d"), simulation)
            try succeeds(Files.write([2], to: "/w/d/later"), simulation)
            XCTAssertEqual(described(watch, after: 2), ["renamed d", "renamed d/inside", "renamed d/later", "changed d/later"])
        }
    }

    func testAnUnreadableSubdirectoryIsNotWatchedAndTheRestIs() throws {
        Simulation.check(seed: 95) { simulation in
            try make(["/w/locked", "/w/open"], simulation)
            try succeeds(Files.chmod("/w/locked", 0o300), simulation)
            let watch = try simulation.record(FileWatch.changes(at: "/w", recursive: true))
            simulation.runUntilIdle()
            XCTAssertEqual(described(watch), ["notWatched locked"], "reported once, at the start")
            try succeeds(Files.write([1], to: "/w/locked/f"), simulation)
            try succeeds(Files.write([2], to: "/w/open/f"), simulation)
            XCTAssertEqual(described(watch, after: 1), ["renamed open/f", "changed open/f"])
            XCTAssertNil(watch.terminal)
        }
    }

    func testTheRootGoingAwayEndsTheWatchAndFollowingLinksIsRefused() throws {
        Simulation.check(seed: 96) { simulation in
            try make(["/w/sub"], simulation)
            let watch = try simulation.record(FileWatch.changes(at: "/w/", recursive: true))
            try succeeds(Files.chmod("/w", 0o700), simulation)
            try succeeds(Files.rename(from: "/w", to: "/v"), simulation)
            XCTAssertEqual(watch.values, [FileEvent(kind: .changed, name: ".", path: "/w")])
            let error = watch.terminal?.error as? UVError
            XCTAssertEqual(error, .noSuchFile)
            XCTAssertEqual(error?.message, "the watched path was deleted or moved away")

            let linked = try simulation.record(FileWatch.changes(at: "/v", recursive: true, followSymlinks: true))
            simulation.runUntilIdle()
            XCTAssertEqual(linked.terminal?.error as? UVError, .notSupported)
            XCTAssertEqual((linked.terminal?.error as? UVError)?.message,
                           "Watch has no simulated backend yet: a simulated loop cannot run a recursive watch following symbolic links")
        }
    }

    func testAnOverflowLosesAnEventTakesInTheDirectoryItHidAndSaysSo() throws {
        let plan: [SimulationFault] = [.watchOverflow(path: "/w", at: .milliseconds(5))]
        let simulation = try Simulation(seed: 97, faultPlan: plan)
        try make(["/w"], simulation)
        let watch = try simulation.record(FileWatch.changes(at: "/w", recursive: true))
        simulation.run(for: .milliseconds(5))
        try succeeds(Files.createDirectory("/w/d"), simulation)
        try succeeds(Files.write([1], to: "/w/d/f"), simulation)
        XCTAssertEqual(described(watch), ["eventsLost .", "renamed d/f", "changed d/f"],
                       "d's creation is lost; the rescan watched d, so its file is reported")
        XCTAssertEqual(watch.values.first?.path, "/w")
        XCTAssertEqual(simulation.injectedFaults, plan)
        XCTAssertTrue(simulation.finish().isClean, "\(simulation.finish().problems)")
    }
}

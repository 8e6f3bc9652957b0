import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A recursive `FileWatch` against an attacker who swaps a directory of the tree for a symbolic link to a
/// directory outside it while the watch takes the tree in: nothing outside the tree is watched or listed.
final class FileWatchRaceTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "reactiveuv-watch-race-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Subdirectories of both the swapped directory and the victim: each is a chance for a walk by paths to
    /// cross the link. Only the victim's hold a file, `secret`.
    private static let subdirectories = (0..<30).map { "sub\($0)" }

    /// 60 rounds: a tree holding `box/d/sub0`...`box/d/sub29` and `box/link`, a link to a victim directory
    /// holding `sub0/secret`...`sub29/secret`; a thread exchanges `d` and the link by name while a recursive
    /// watch of the tree starts. Right after the start (on the loop, before any event is handled), no watch of
    /// the process is on the victim or its subdirectories. Before, the scan listed `tree/box/d` and watched
    /// `tree/box/d/subN` by paths the kernel resolved again, through the link when it had `d`'s name.
    func testASwappedDirectoryNeverWidensARecursiveWatchAsItStarts() throws {
        var widened: [Int] = []
        var swaps = 0
        try checked { harness in
            for round in 0..<60 {
                let tree = directory + "/round-\(round)/tree"
                let outside = try makeBoxAndVictim(box: tree + "/box", victim: directory + "/round-\(round)/victim")
                let attacker = try SwappingAttacker(directory: tree + "/box/d", link: tree + "/box/link")
                let watched = try harness.onLoop {
                    let subscription = FileWatch.changes(at: tree, recursive: true).subscribe(next: { _ in })
                    defer { subscription.dispose() }
                    return InotifyProbe.watchedInodesOfThisProcess()
                }
                swaps += attacker.stop()
                if !watched.isDisjoint(with: outside) { widened.append(round) }
            }
        }
        XCTAssertEqual(widened, [], "rounds whose watch reached the victim")
        XCTAssertGreaterThan(swaps, 0, "the attacker swapped while watches started")
    }

    /// 60 rounds: the same box, made outside the tree and moved into a watched tree while the attacker swaps
    /// `box/d` and `box/link`. The watch takes the new directory in and reports what it finds in it; once
    /// the attacker stopped and a marker file's event came, no event names a victim's `secret`. Before, the
    /// scan listed `tree/box/d/subN` by a path through the link and reported the victim's entries as the tree's.
    func testASwappedDirectoryNeverShowsANewDirectoryAnythingOutsideTheTree() throws {
        var leaked: [Int: [String]] = [:]
        var swaps = 0
        try checked { harness in
            for round in 0..<60 {
                let base = directory + "/round-\(round)", tree = base + "/tree"
                try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
                _ = try makeBoxAndVictim(box: base + "/box", victim: base + "/victim")
                let watch = try harness.record(FileWatch.changes(at: tree, recursive: true))
                // On the loop, so that the watch hears of the move only once the attacker runs.
                let attacker = try harness.onLoop {
                    XCTAssertEqual(rename(base + "/box", tree + "/box"), 0)
                    // Each exchange is 4 events, and each new directory a scan: a few hundred are enough.
                    return try SwappingAttacker(directory: tree + "/box/d", link: tree + "/box/link", limit: 300)
                }
                try watch.wait(for: "the new directory's entries", timeout: .seconds(60)) { events in
                    events.contains { $0.value?.name.hasPrefix("box/") == true } || events.last?.isTerminating == true
                }
                swaps += attacker.stop()
                XCTAssertTrue(FileManager.default.createFile(atPath: tree + "/marker", contents: nil))
                try watch.wait(for: "the marker's event", timeout: .seconds(60)) { events in
                    events.contains { $0.value?.name == "marker" } || events.last?.isTerminating == true
                }
                let secrets = watch.values.map(\.name).filter { $0.hasSuffix("/secret") }
                if !secrets.isEmpty { leaked[round] = secrets }
                XCTAssertNil(watch.terminal, "round \(round)")
                watch.dispose()
            }
        }
        XCTAssertEqual(leaked, [:], "names from the victim reported, by round")
        XCTAssertGreaterThan(swaps, 0, "the attacker swapped while new directories were taken in")
    }

    /// A tree 80 levels deep, more than a scan holds descriptors for (32): every level is watched, a file made
    /// at the bottom is reported, and no descriptor is left open on the tree once the watch started.
    func testATreeDeeperThanTheHeldLevelsIsWatchedWhole() throws {
        var bottom = directory + "/deep"
        var relative: [String] = []
        for level in 0..<80 {
            relative.append("l\(level)")
            bottom += "/l\(level)"
        }
        try FileManager.default.createDirectory(atPath: bottom, withIntermediateDirectories: true)
        try checked { harness in
            let before = InotifyProbe.watchesOfThisProcess()
            let watch = try harness.record(FileWatch.changes(at: directory + "/deep", recursive: true))
            XCTAssertEqual(InotifyProbe.watchesOfThisProcess() - before, 81, "the root and 80 levels")
            XCTAssertEqual(try openDescriptorTargets().filter { $0.hasPrefix(directory) }, [])
            XCTAssertTrue(FileManager.default.createFile(atPath: bottom + "/made", contents: nil))
            try watch.wait(for: "the file made at the bottom", timeout: .seconds(60)) { events in
                events.contains { $0.value?.name == (relative + ["made"]).joined(separator: "/") }
            }
            XCTAssertNil(watch.terminal)
        }
    }

    /// `box/d/sub0`...`box/d/sub29`, `box/link` pointing to `victim`, which holds `sub0/secret`...`sub29/secret`.
    /// Returns the inodes of the victim and its subdirectories.
    private func makeBoxAndVictim(box: String, victim: String) throws -> Set<UInt64> {
        var inodes: Set<UInt64> = []
        for sub in Self.subdirectories {
            try FileManager.default.createDirectory(atPath: box + "/d/" + sub, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: victim + "/" + sub, withIntermediateDirectories: true)
            XCTAssertTrue(FileManager.default.createFile(atPath: victim + "/" + sub + "/secret", contents: nil))
            inodes.insert(try inode(victim + "/" + sub))
        }
        inodes.insert(try inode(victim))
        XCTAssertEqual(symlink(victim, box + "/link"), 0)
        return inodes
    }

    private func inode(_ path: String) throws -> UInt64 {
        var status = stat()
        guard lstat(path, &status) == 0 else { throw TestFailure("lstat \(path): errno \(errno)") }
        return UInt64(status.st_ino)
    }

    private func checked(_ body: (LoopHarness) throws -> Void) throws {
        let report = LoopHarness.run(body)
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

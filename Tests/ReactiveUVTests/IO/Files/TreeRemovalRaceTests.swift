import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// `Files.removeTree` against an attacker who swaps a directory of the tree for a symbolic link while it is
/// being emptied (the race of Rust's CVE-2022-21658 and of the old `rm -r`): nothing outside the tree is removed.
final class TreeRemovalRaceTests: FileSystemTestCase {
    /// Names shared by the directory being emptied and the victim: a walk that resolves `tree/d/NAME` again
    /// after `d` became a link to the victim removes the victim's file of that name.
    private static let sharedNames = (0..<300).map { "f\($0)" }

    /// 60 rounds: a tree whose directory `d` holds 300 files, and a victim directory holding files of the same
    /// names; while the tree is removed, a thread exchanges `d` and a link to the victim by name, again and
    /// again until the removal ends. Whether the removal completes or fails (`rmdir` meeting the link, the
    /// tree not empty), the victim keeps every file in every round. Before, entries were unlinked by paths
    /// through `d`, which the kernel resolved again at each call: the victim lost files in 12 of the 60 rounds.
    func testASwappedDirectoryNeverLeadsTheRemovalOutsideTheTree() throws {
        var lost: [Int: Int] = [:]
        var swapsDuringRemovals = 0
        try checked { harness in
            for round in 0..<60 {
                let base = path("round-\(round)")
                let tree = base + "/tree", victim = base + "/victim"
                try FileManager.default.createDirectory(atPath: tree + "/d", withIntermediateDirectories: true)
                try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: false)
                for name in Self.sharedNames {
                    XCTAssertTrue(FileManager.default.createFile(atPath: tree + "/d/" + name, contents: nil))
                    XCTAssertTrue(FileManager.default.createFile(atPath: victim + "/" + name, contents: nil))
                }
                XCTAssertEqual(symlink(victim, tree + "/link"), 0)

                let attacker = try SwappingAttacker(directory: tree + "/d", link: tree + "/link")
                let removal = try harness.record(Files.removeTree(tree))
                let terminal = try removal.waitForTermination(timeout: .seconds(60))
                swapsDuringRemovals += attacker.stop()
                if let error = terminal.error {
                    XCTAssertTrue(error is UVError, "round \(round): \(error)")
                }
                let kept = try FileManager.default.contentsOfDirectory(atPath: victim).count
                if kept != Self.sharedNames.count { lost[round] = Self.sharedNames.count - kept }
            }
        }
        XCTAssertEqual(lost, [:], "files of the victim removed, by round")
        XCTAssertGreaterThan(swapsDuringRemovals, 0, "the attacker swapped while removals ran")
    }

    /// Six levels `a/b/c/d/e`, each with files `f0`...`f9`, removed holding at most 2 descriptors: each
    /// directory whose descriptor was closed on the way down is opened again as `..` of its child, and
    /// no more than 1 descriptor is open on the tree before each opening (so 2 after it).
    func testADeepTreeIsRemovedHoldingABoundedNumberOfDescriptors() throws {
        let root = path("root")
        try makeLevels(under: root)
        var mostOpen = 0, reopened: [String] = []
        let walk = TreeRemovalWalk(root: root, descriptorLimit: 2) { directory, reopening in
            if reopening { reopened.append(directory.description) }
            mostOpen = max(mostOpen, (try? openDescriptorTargets().filter { $0.hasPrefix(root) }.count) ?? .max)
        }
        XCTAssertEqual(try walk.advance(budget: .max, stop: JobStopFlag()), .done)
        XCTAssertFalse(FileManager.default.fileExists(atPath: root))
        XCTAssertEqual(reopened, [root + "/a/b/c", root + "/a/b", root + "/a", root])
        XCTAssertEqual(mostOpen, 1)
        XCTAssertEqual(try openDescriptorTargets().filter { $0.hasPrefix(root) }, [])
    }

    /// The same walk, but the directory being left (`d`) is moved into a victim directory holding files of its
    /// parent's names just before the parent is opened again as its `..`: `..` is now the victim, whose device
    /// and inode are not the parent's, so the removal ends with `EBUSY` naming the move and the victim keeps
    /// every file (removing the parent's remaining names relative to `..` would have removed the victim's).
    func testATreeMovedWhileAParentWasClosedEndsTheRemovalWithEBUSY() throws {
        let root = path("root"), victim = path("victim")
        try makeLevels(under: root)
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: false)
        for file in 0..<10 { XCTAssertTrue(FileManager.default.createFile(atPath: victim + "/f\(file)", contents: nil)) }
        let walk = TreeRemovalWalk(root: root, descriptorLimit: 2) { parent, reopening in
            if reopening && parent.description == root + "/a/b/c" { XCTAssertEqual(rename(parent.description + "/d", victim + "/d"), 0) }
        }
        defer { walk.close() }
        do {
            let progress = try walk.advance(budget: .max, stop: JobStopFlag())
            XCTFail("the removal went on after the move: \(progress)")
        } catch {
            XCTAssertEqual(error.name, "EBUSY")
            XCTAssertTrue(error.message.hasPrefix("the tree was moved during the removal: the directory above \(root)/a/b/c/d is no longer \(root)/a/b/c"),
                          error.message)
            XCTAssertEqual(error.context, "removeTree \(root)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: victim).sorted(), ["d"] + (0..<10).map { "f\($0)" }.sorted())
        XCTAssertTrue(FileManager.default.fileExists(atPath: root + "/a/b/c"), "the parent was not removed")
    }

    /// `root/a/b/c/d/e`, every level (the root too) holding files `f0`...`f9`.
    private func makeLevels(under root: String) throws {
        var level = root
        for name in ["", "a", "b", "c", "d", "e"] {
            if !name.isEmpty { level += "/" + name }
            try FileManager.default.createDirectory(atPath: level, withIntermediateDirectories: false)
            for file in 0..<10 { XCTAssertTrue(FileManager.default.createFile(atPath: level + "/f\(file)", contents: nil)) }
        }
    }
}

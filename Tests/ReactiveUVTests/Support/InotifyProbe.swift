import Foundation
import XCTest

/// What the kernel says about inotify, for file-watch tests: watches held, and the limits in /proc/sys/fs/inotify.
enum InotifyProbe {
    /// The inotify watches this process holds now (every "inotify wd:" line of /proc/self/fdinfo).
    static func watchesOfThisProcess() -> Int {
        watches(inFdinfoOf: "self")
    }

    /// The inotify watches every visible process holds now (the per-user limit counts them all).
    static func watchesOfEveryProcess() -> Int {
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return processes.filter { $0.allSatisfy(\.isNumber) }.reduce(0) { $0 + watches(inFdinfoOf: $1) }
    }

    /// The inode numbers this process's inotify watches are on now (the "ino:" of each "inotify wd:" line, hex).
    static func watchedInodesOfThisProcess() -> Set<UInt64> {
        let directory = "/proc/self/fdinfo"
        var inodes: Set<UInt64> = []
        for descriptor in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            guard let text = try? String(contentsOfFile: directory + "/" + descriptor, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") where line.hasPrefix("inotify wd:") {
                guard let field = line.split(separator: " ").first(where: { $0.hasPrefix("ino:") }),
                      let inode = UInt64(field.dropFirst(4), radix: 16) else { continue }
                inodes.insert(inode)
            }
        }
        return inodes
    }

    private static func watches(inFdinfoOf process: String) -> Int {
        let directory = "/proc/\(process)/fdinfo"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var count = 0
        for descriptor in descriptors {
            // A descriptor can close between the listing and the read: it then holds no watch.
            guard let text = try? String(contentsOfFile: directory + "/" + descriptor, encoding: .utf8) else { continue }
            count += text.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
        }
        return count
    }

    /// Sets /proc/sys/fs/inotify/`name` to `value` for as short a time as `body` takes, and restores it even
    /// when `body` throws; skips the test when the setting cannot be written (not root, read-only /proc).
    ///
    /// The limits are per user across the machine: keep `body` short, other programs run meanwhile.
    static func withLimit<R>(_ name: String, setTo value: Int, _ body: () throws -> R) throws -> R {
        let path = "/proc/sys/fs/inotify/" + name
        let original = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard write("\(value)", to: path) else { throw XCTSkip("cannot write \(path) (needs root and a writable /proc)") }
        defer {
            if !write(original, to: path) { XCTFail("could not restore \(path) to \(original)") }
        }
        return try body()
    }

    /// Skips the test unless /proc/sys/fs/inotify/`name` can be written (call it before a harness starts:
    /// the harness reports what its body throws as a failure).
    static func requireWritableLimit(_ name: String) throws {
        let path = "/proc/sys/fs/inotify/" + name
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw XCTSkip("cannot write \(path) (needs root and a writable /proc)")
        }
        try? handle.close()  // opened to learn it can be written; nothing was written
    }

    private static func write(_ text: String, to path: String) -> Bool {
        guard let handle = FileHandle(forWritingAtPath: path) else { return false }
        defer { try? handle.close() }
        do {
            try handle.write(contentsOf: Data((text + "\n").utf8))
            return true
        } catch {
            return false
        }
    }
}

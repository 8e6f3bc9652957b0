internal import CLibUV
import Synchronization

/// One change reported by a file watch.
///
/// Thread rule: a value type; safe from any thread.
public struct FileEvent: Sendable, Hashable, CustomStringConvertible {
    /// What happened: libuv's two kinds of change, a rename with both names, and two notices about the watch itself.
    public enum Kind: Sendable, Hashable {
        /// The contents or attributes changed (`chmod`, `touch`, a write).
        case changed
        /// An entry appeared or disappeared (creation and deletion are reported as renames, as libuv does),
        /// including one moved into or out of the watch; for a watched file, also the file replaced under its name.
        case renamed
        /// An entry of a watched directory was renamed, its old and new names both under the watch (within one
        /// directory, or across the directories of a recursive watch): `name` is the new name, `oldName` the old;
        /// an entry the new name replaced is not reported apart. A directory renamed in a recursive watch is one
        /// event; what is below it stays watched, under the new name. Never sent by the watch of a file.
        case moved
        /// The kernel's event queue overflowed (`IN_Q_OVERFLOW`): changes made before this event may
        /// not have been reported. Every change after it is; rescan what you keep about the tree.
        /// `name` is `"."` for a directory, the file's name for a file.
        case eventsLost
        /// A subdirectory of a recursive watch the process may not read (`EACCES`), or whose name is not
        /// valid UTF-8 (`name` then shows U+FFFD for what is not, and names no file): it and everything
        /// below it are not watched. `name` is the subdirectory.
        case notWatched
    }

    /// The kind of change.
    public let kind: Kind
    /// The entry's path relative to the watched directory ("a.txt", or "sub/a.txt" in a recursive watch);
    /// `"."` for the watched directory itself; for a watched file, its file name.
    public let name: String
    /// The watched path the event belongs to plus `name` (for the watched directory itself or a watched file, the watched path).
    public let path: String
    /// For `.moved`, the entry's name before the move, relative to the watched directory as `name` is; nil otherwise.
    public let oldName: String?
    /// For `.moved`, the entry's full path before the move, as `path` is; nil otherwise.
    public let oldPath: String?

    /// Creates an event.
    ///
    /// - Parameters:
    ///   - kind: What happened.
    ///   - name: The entry, relative to the watched directory (for `.moved`, its new name).
    ///   - path: The full path.
    ///   - oldName: For `.moved`, the name before the move; nil for the other kinds.
    ///   - oldPath: For `.moved`, the full path before the move; nil for the other kinds.
    /// - Returns: The event.
    ///
    /// Thread rule: safe from any thread.
    public init(kind: Kind, name: String, path: String, oldName: String? = nil, oldPath: String? = nil) {
        self.kind = kind
        self.name = name
        self.path = path
        self.oldName = oldName
        self.oldPath = oldPath
    }

    /// `"renamed sub/a.txt"`; for a move, `"moved a.txt -> sub/b.txt"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        guard let oldName else { return "\(kind) \(name)" }
        return "\(kind) \(oldName) -> \(name)"
    }
}

/// File and directory watching: inotify read on the loop (`uv_poll`), and `uv_fs_poll` on stat.
///
/// Thread rule: safe from any thread.
public enum FileWatch {
    /// How long the first half of a rename (`IN_MOVED_FROM`) that ended a read waits for its second half in
    /// the next read before it is reported alone, as `.renamed` (an entry moved out of the watch).
    static let moveHalfWait: Duration = .milliseconds(20)

    /// Sends an event for each change to the file at `path`, or to the entries of the directory at `path`.
    ///
    /// The watch starts when a subscriber arrives and stops when the
    /// subscription is disposed; the signal never completes on its own. A path
    /// that does not exist or cannot be read ends the signal with a `UVError`
    /// (`ENOENT`, `EACCES`, `ENOTDIR`...). Linux reports a creation or deletion
    /// as `.renamed`, and a write or an attribute change as `.changed` (often
    /// several per write). A change to the watched directory itself (`chmod`,
    /// `touch`) is `.changed` with the name `"."`.
    ///
    /// A rename whose old and new names are both under a directory's watch is
    /// one `.moved` event with both names; an entry moved out of the watch is
    /// `.renamed` under its old name (a deletion), one moved in is `.renamed`
    /// under its new name (a creation). inotify reports a rename's two halves
    /// as two events with one cookie, queued one after the other: they are
    /// paired when the second is the next event the loop's inotify instance
    /// reads after the first, in the same read or the next. A first half that
    /// ends a read waits up to 20 ms for the next; with none, or another event
    /// first, it is reported alone as `.renamed`. So a move out of the watch
    /// is reported up to 20 ms late, and a rename whose halves another event
    /// came between (another process's, a queue overflow) is two `.renamed`.
    ///
    /// `recursive: true` also watches every subdirectory, following new ones
    /// as they appear (Linux has no recursive inotify, so ReactiveUV adds one
    /// watch per directory). Entries found in a directory when its watch is
    /// added are reported as `.renamed`, so a file made in a new directory
    /// before its watch existed is not missed (an entry may then be reported
    /// twice). A subdirectory deleted and made again is watched again (the new
    /// one is a different inode). A subdirectory the process may not read is
    /// reported once as `.notWatched` and the rest of the tree is watched. A
    /// subdirectory renamed within the tree keeps its watches (nothing is read
    /// again, nothing below it is reported): later changes below it are
    /// reported under the name it has when the rename is read (a directory
    /// renamed back meanwhile, or exchanged, stays watched where it is). An
    /// exchange (`renameat2` `RENAME_EXCHANGE`) is two `.moved`, one each way.
    ///
    /// A recursive watch does not follow symbolic links: a link to a directory
    /// (inside the tree or out of it) is reported as an entry, but what it
    /// points to is not watched, so a link cannot widen the watch beyond the
    /// tree, not even one swapped in for a directory while the watch takes it
    /// in: each subdirectory is opened from its parent's descriptor and watched
    /// through its own (`/proc/self/fd`; without `/proc` mounted a recursive
    /// watch ends with `ENOSYS`). Pass `followSymlinks: true` to watch linked directories too; each
    /// directory (by device and inode) is then watched once, so a link cycle
    /// ends instead of recursing.
    ///
    /// A watched file follows its name, as `tail -F` does: when another file
    /// takes the name (an editor's save that writes a temporary file and
    /// renames it over the original) the replacement is reported as `.renamed`
    /// and the new file is watched from then on. If the name is deleted or
    /// moved away and no file takes it within 100 ms, the deletion is reported
    /// as `.renamed` and the signal ends with `ENOENT`. If the watched directory
    /// itself is deleted or moved away, the signal ends with `ENOENT` (the
    /// kernel drops the watch, so nothing more could be reported). inotify does
    /// not report a directory above the watched one renamed or removed: events
    /// keep coming with the old `path`, and a recursive watch ends with `ENOENT`
    /// when a new subdirectory cannot be found by its path (it would not be watched).
    ///
    /// Limits end the signal visibly: a directory that cannot be watched
    /// because the per-user limit `fs.inotify.max_user_watches` is reached ends
    /// it with `ENOSPC` naming the limit and the directory; no inotify instance
    /// left (`fs.inotify.max_user_instances`) is `EMFILE`. When the kernel's
    /// event queue (`fs.inotify.max_queued_events`) overflows, an `.eventsLost`
    /// event says so (after the watch has taken in any directory made
    /// meanwhile), and watching goes on.
    ///
    /// - Parameters:
    ///   - path: A file or directory; an empty path fails with `ENOENT`, one with a NUL byte with `EINVAL`,
    ///     before anything is watched.
    ///   - recursive: Also watch subdirectories (only meaningful for a directory).
    ///   - followSymlinks: With `recursive`, also watch directories reached through symbolic links.
    ///   - loop: The loop that watches; nil for the subscription's home loop.
    /// - Returns: A signal of changes.
    ///
    /// Thread rule: safe from any thread.
    public static func changes(at path: String, recursive: Bool = false, followSymlinks: Bool = false,
                               on loop: EventLoop? = nil) -> Signal<FileEvent> {
        Signal { subscriber in
            // inotify and stat take C strings: a NUL would watch the path cut there, and report that
            // path's entries under a name that holds the rest.
            if let refusal = Files.pathRefusal(of: path, in: "FileWatch.changes") {
                subscriber.sendError(refusal)
                return nil
            }
            return LoopBinding.open(on: loop, for: subscriber, what: "FileWatch.changes") { loop in
                if loop.isSimulated {
                    return SimulatedDirectoryWatch.open(path, recursive: recursive, followSymlinks: followSymlinks, files: loop.simulatedFiles,
                                                    loop: loop, subscriber: subscriber)
                }
                let session = FileWatchSession(loop: loop, root: path, recursive: recursive, followSymlinks: followSymlinks,
                                               subscriber: subscriber)
                return LoopBinding.started(session, for: subscriber) { try session.start() }
            }
        }.debugNamed("+FileWatch.changes(\(path))")
    }
}

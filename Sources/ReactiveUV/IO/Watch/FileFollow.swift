internal import CLibUV

/// The options and events of `FileWatch.follow(at:)` and `FileWatch.followEvents(at:)`: a file
/// followed by name, as `tail -F` follows it.
///
/// Thread rule: a namespace of value types; safe from any thread.
public enum FileFollow {
    /// Where reading starts in the file found at the start.
    ///
    /// It applies to the first file only, when it can be read at once: a file that appears later,
    /// takes the name (a rotation) or becomes readable is read from its start, as `tail -F` reads it.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Start: Sendable, Hashable {
        /// From the first byte.
        case beginning
        /// From the end as it is when the file is opened: only what is appended after (`tail -F`'s default).
        case end
        /// From this byte offset (0 or more), for instance one saved by a previous run. An offset past
        /// the file's end means the file was truncated or replaced since: it is read from 0 after a
        /// `.truncated` notice.
        case offset(Int)
    }

    /// What to do when the name names no file at the start (`ENOENT`, `ENOTDIR`), or one that may not
    /// be read (`EACCES`, `EPERM`).
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum IfMissing: Sendable, Hashable {
        /// Wait for a readable file to take the name (`tail -F`): a `.missing` or `.denied` notice, then
        /// the name is looked at again on each wake.
        case wait
        /// End the signal with the error.
        case fail
    }

    /// One event of `FileWatch.followEvents(at:)`: bytes appended, or a notice about the name.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Event: Sendable, Hashable {
        /// Bytes read from the followed file, in file order, each byte once.
        case bytes([UInt8])
        /// Something happened to the name or the file (rotation, truncation, absence).
        case notice(Notice)

        /// The bytes of a `.bytes` event; nil for a notice.
        ///
        /// Thread rule: safe from any thread.
        public var bytes: [UInt8]? {
            if case .bytes(let bytes) = self { return bytes }
            return nil
        }
    }

    /// What a follower says about the name it follows; each is sent once per change of state.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Notice: Sendable, Hashable {
        /// A file is followed from now on: the one found at the start, a new one that took the name
        /// (after the previous one was read to its end), or the one held whose name names it again.
        /// Carries what `fstat` said of it when it was opened.
        case following(FileInfo)
        /// The name names nothing now. A file renamed away and still linked is read on (its writer
        /// may append until it reopens the name) until another file takes the name; a deleted one
        /// is read to its end and closed.
        case missing
        /// The file at the name may not be read (`EACCES`, `EPERM`): it is tried again on each wake.
        case denied(UVError)
        /// Something that cannot be followed took the name (a directory, a FIFO, a device): it is
        /// looked at again on each wake until a regular file has the name.
        case notAFile(FileType)
        /// The file became shorter than what was read (`copytruncate`, `> file`): it is read again from 0.
        case truncated
        /// The directory cannot be watched (`EACCES`, `ENOSPC`, `EMFILE`): changes are looked for every
        /// `interval` only, as GNU tail falls back to polling.
        case unwatchable(directory: String, error: UVError)
    }

    /// The settings checked at the door and shared by both factories.
    struct Settings: Sendable {
        let path: String
        let directory: String
        let start: Start
        let chunkSize: Int
        let ifMissing: IfMissing
        let interval: Duration

        /// The refusal of bad arguments, before anything is opened or watched.
        func refusal(in call: String) -> UVError? {
            let context = "\(call)(\(path))"
            if path.isEmpty { return UVError(code: UV_ENOENT.rawValue, message: "the path is empty", context: call) }
            if path.utf8.contains(0) {
                return UVError(code: UV_EINVAL.rawValue, message: "the path holds a NUL byte", context: context)
            }
            if case .offset(let offset) = start, offset < 0 {
                return UVError(code: UV_EINVAL.rawValue, message: "the start offset must be 0 or more, got \(offset)", context: context)
            }
            guard (1...OpenFile.maxReadCount).contains(chunkSize) else {
                return UVError(code: UV_EINVAL.rawValue,
                               message: "chunkSize must be 1...\(OpenFile.maxReadCount), got \(chunkSize)", context: context)
            }
            guard interval > .zero else {
                return UVError(code: UV_EINVAL.rawValue, message: "interval must be positive, got \(interval)", context: context)
            }
            return nil
        }

        /// The directory the name lives in: watched, so that renames and creations of the name wake the follower.
        static func directory(of path: String) -> String {
            guard let slash = path.lastIndex(of: "/") else { return "." }
            return slash == path.startIndex ? "/" : String(path[..<slash])
        }
    }
}

extension FileWatch {
    /// Sends the bytes appended to the file at `path`, following the name as `tail -F` does.
    ///
    /// The bytes of `followEvents(at:from:chunkSize:ifMissing:interval:on:)` without its notices: read
    /// `.lines()` (or any framing operator) from it for lines. The follower survives a rotation (the file
    /// renamed away and a new one made under the name), `copytruncate` (truncation: read again from 0),
    /// a delete and re-create, and a directory that disappears and comes back; see `followEvents` for
    /// the rules, the options and what is and is not seen.
    ///
    /// ```swift
    /// FileWatch.follow(at: "/var/log/app.log").lines()
    ///     .subscribeNext { line in print(String(decoding: line, as: UTF8.self)) }
    /// ```
    ///
    /// - Parameters:
    ///   - path: The file's name; its directory is watched. An empty path fails with `ENOENT`, one with
    ///     a NUL byte with `EINVAL`; a directory fails with `EISDIR` naming the path.
    ///   - start: Where reading starts in the first file (default `.end`).
    ///   - chunkSize: The largest read, 1...`OpenFile.maxReadCount` (default 64 KiB); others fail with `EINVAL`.
    ///   - ifMissing: Whether a missing or unreadable file at the start is awaited (default) or an error.
    ///   - interval: How often the name is also looked at, for changes no watch reports (default 1 s;
    ///     must be positive, else `EINVAL`).
    ///   - loop: The loop that reads and watches; nil for the subscription's home loop.
    /// - Returns: A signal of byte chunks that never completes on its own.
    ///
    /// Thread rule: safe from any thread; bytes arrive on the subscription's home thread.
    public static func follow(at path: String, from start: FileFollow.Start = .end, chunkSize: Int = 65_536,
                              ifMissing: FileFollow.IfMissing = .wait, interval: Duration = .seconds(1),
                              on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        followEvents(at: path, from: start, chunkSize: chunkSize, ifMissing: ifMissing, interval: interval, on: loop)
            .compactMap(\.bytes)
            .debugNamed("+FileWatch.follow(\(path))")
    }

    /// Sends the bytes appended to the file at `path` and a notice for each change of the name, following
    /// the name as GNU `tail -F` does.
    ///
    /// The file is read from `start`, then from where the last read stopped whenever the follower wakes:
    /// on any inotify event in the file's directory, and every `interval` besides (for a rename into
    /// another directory, a network file system, a directory that cannot be watched). On each wake it
    /// reads to the end, then compares the open file with the name:
    ///
    /// - **Rotation** (the file renamed away, another made under the name): what the old file still
    ///   holds is read to its end first, then the new file from its start (`.following`). Bytes written
    ///   to the old file between the rotation and that last read are therefore not lost; bytes its
    ///   writer adds after it are (as with GNU tail).
    /// - **Renamed away, no new file yet** (logrotate's `nocreate`): `.missing`, and the old file is read
    ///   on, since its writer may still append, until a file takes the name.
    /// - **Truncation** (`copytruncate`): a file shorter than the offset read is read again from 0
    ///   (`.truncated`). A truncation followed by a rewrite to that size or more before the follower
    ///   looked cannot be seen, as with GNU tail.
    /// - **Deleted**: read to its end and closed (`.missing`); a file made again under the name is
    ///   followed from its start.
    /// - **The directory removed**: its watch ends; it is watched again every `interval` until it is
    ///   back, and the name is looked at meanwhile.
    /// - **Something else takes the name** (a directory swapped in): `.notAFile`, waited out.
    ///
    /// Reads run one at a time on the thread pool, at most `chunkSize` bytes each; a consumer that pauses
    /// (a full `values` buffer) holds the next read. The signal never completes on its own; it fails
    /// with a read's error, with `EventLoopError.shutDown` at the loop's shutdown, and at the start as
    /// `ifMissing` says. Disposing stops everything: the watch, the timer, and the file is closed.
    ///
    /// - Parameters:
    ///   - path: The file's name; its directory is watched. An empty path fails with `ENOENT`, one with
    ///     a NUL byte with `EINVAL`. A directory at the start fails with `EISDIR` naming the path, and any
    ///     other file that is not a regular file with `EINVAL` (positional reads need a regular file).
    ///   - start: Where reading starts in the first file (default `.end`); a negative offset fails with `EINVAL`.
    ///   - chunkSize: The largest read, 1...`OpenFile.maxReadCount` (default 64 KiB); others fail with `EINVAL`.
    ///   - ifMissing: Whether a missing or unreadable file at the start is awaited (default) or an error.
    ///   - interval: How often the name is also looked at, and a missing directory watched again (default
    ///     1 s; must be positive, else `EINVAL`).
    ///   - loop: The loop that reads and watches; nil for the subscription's home loop.
    /// - Returns: A signal of events that never completes on its own.
    ///
    /// Thread rule: safe from any thread; events arrive on the subscription's home thread.
    public static func followEvents(at path: String, from start: FileFollow.Start = .end, chunkSize: Int = 65_536,
                                    ifMissing: FileFollow.IfMissing = .wait, interval: Duration = .seconds(1),
                                    on loop: EventLoop? = nil) -> Signal<FileFollow.Event> {
        let settings = FileFollow.Settings(path: path, directory: FileFollow.Settings.directory(of: path), start: start,
                                           chunkSize: chunkSize, ifMissing: ifMissing, interval: interval)
        return Signal { subscriber in
            if let refusal = settings.refusal(in: "FileWatch.follow") {
                subscriber.sendError(refusal)
                return nil
            }
            return LoopBinding.open(on: loop, for: subscriber, what: "FileWatch.follow") { loop in
                FileFollowSession(loop: loop, settings: settings, subscriber: subscriber).start()
            }
        }.debugNamed("+FileWatch.followEvents(\(path))")
    }
}

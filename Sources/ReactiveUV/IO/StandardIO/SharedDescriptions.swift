#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file status flags of the open file descriptions under `StandardIO`'s streams on
/// descriptors 0, 1 and 2, counted per description.
///
/// libuv sets `O_NONBLOCK` in place, on the open file description, which 0, 1 and 2 often share
/// (inetd, socket activation, `prog <&3 >&3`, `2>&1`). So the flags saved by the first stream on
/// a description are put back when the last one closes, never before: under a stream still open
/// they would make the loop block in `write(2)`.
///
/// One description: same device and inode from `fstat` and same access mode. Exact for sockets
/// and pipe ends; two read-write openings of one FIFO or terminal count as one, which only
/// delays the first's restore.
/// Thread rule: safe from any thread (a lock guards the counts).
enum SharedDescriptions {
    /// What identifies a description here: its file and its access mode.
    private struct Description: Hashable {
        let device: UInt64
        let inode: UInt64
        let accessMode: Int32
    }

    private struct Users {
        /// The description's flags before the first of its streams opened.
        let savedFlags: Int32
        var count: Int
    }

    private struct State {
        var users: [Description: Users] = [:]
        /// The description each registered descriptor is counted under.
        var counted: [Int32: Description] = [:]
    }

    private static let state = LockedValue(State())

    /// Counts a stream about to open on `descriptor` (claimed already), before libuv changes its
    /// flags. Descriptors above 2 are not counted: libuv closes them with their handle.
    static func streamWillOpen(on descriptor: Int32) {
        guard (0...2).contains(descriptor) else { return }
        state.withLock { state in
            // Under the lock: another stream's restore must not fall between this read of the flags and
            // libuv making the description non-blocking.
            guard let description = describe(descriptor) else { return }
            if var users = state.users[description] {
                users.count += 1
                state.users[description] = users
            } else {
                state.users[description] = Users(savedFlags: fcntl(descriptor, F_GETFL), count: 1)
            }
            state.counted[descriptor] = description
        }
    }

    /// Uncounts the stream on `descriptor`: the last of its description puts the saved flags back,
    /// if the descriptor still refers to that description.
    static func streamDidClose(on descriptor: Int32) {
        state.withLock { state in
            guard let description = state.counted.removeValue(forKey: descriptor),
                  var users = state.users[description] else { return }
            users.count -= 1
            guard users.count == 0 else {
                state.users[description] = users
                return
            }
            state.users[description] = nil
            // Under the lock, as in `streamWillOpen`.
            if users.savedFlags >= 0, describe(descriptor) == description {
                _ = fcntl(descriptor, F_SETFL, users.savedFlags)
            }
        }
    }

    /// The description `descriptor` refers to now; nil when it is not open.
    private static func describe(_ descriptor: Int32) -> Description? {
        var status = stat()
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fstat(descriptor, &status) == 0 else { return nil }
        return Description(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), accessMode: flags & O_ACCMODE)
    }
}

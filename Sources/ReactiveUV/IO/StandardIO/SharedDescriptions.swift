#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file status flags of the open file descriptions under `StandardIO`'s streams on
/// descriptors 0, 1 and 2, counted per description.
///
/// libuv makes a pipe or socket non-blocking in place, and `O_NONBLOCK` belongs to the open
/// file description, not to the descriptor. Descriptors 0, 1 and 2 often share one: a program
/// started by inetd or systemd socket activation, `prog <&3 >&3`, `2>&1`, a terminal's shell.
/// So the rule: the flags saved when the first stream on a description opened are put back
/// when the last stream on it closes, never before. Put back under a stream still open (the
/// standard output writer, when the standard input reader is disposed), they would make its
/// descriptor blocking, and the loop would block in `write(2)` until the peer reads.
///
/// Two descriptors are taken to be one description when `fstat` gives the same device and
/// inode and `F_GETFL` the same access mode. That is exact for the cases that matter: two
/// descriptors of one socket are always one description (a socket cannot be opened again by
/// name), and the two ends of a pipe, or a FIFO or terminal opened once for reading and once
/// for writing, differ in access mode. Two separate read-write openings of one FIFO or
/// terminal would be counted as one, which only delays putting back the flags of the first
/// until the second closes.
///
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

    /// Counts a stream about to open on `descriptor` (already claimed in `DescriptorClaims`),
    /// before libuv changes its flags. Descriptors above 2 are not counted: libuv closes them
    /// with their handle, and nothing of theirs outlives it.
    static func streamWillOpen(on descriptor: Int32) {
        guard (0...2).contains(descriptor) else { return }
        state.withLock { state in
            // The system calls run under the lock: another stream's restore (below) must not fall
            // between this reading of the flags and libuv making the description non-blocking.
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

    /// Uncounts the stream on `descriptor` (its handle is closing): the last stream of its
    /// description puts the saved flags back, if the descriptor still refers to that description.
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
            // Under the lock for the reason given in `streamWillOpen`.
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

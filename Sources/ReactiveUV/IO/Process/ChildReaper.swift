import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reaps the children a loop's shutdown killed: their process handles close at once, so libuv
/// never collects their exit. A thread of its own waits for each pid in turn (never for any
/// child: the others belong to their loops), so the shutdown does not; it ends when none is left.
/// Thread rule: safe from any thread.
enum ChildReaper {
    private struct Queue {
        var pids: [Int32] = []
        var threadRuns = false
    }

    private static let queue = Mutex(Queue())

    /// Reaps `pid`, sent SIGKILL and no longer watched by a process handle: at once when it is gone
    /// already, else on the reaper thread.
    /// Thread rule: safe from any thread; never waits.
    static func reap(_ pid: Int32) {
        if reapIfExited(pid) { return }
        let startThread = queue.withLock { queue in
            queue.pids.append(pid)
            guard !queue.threadRuns else { return false }
            queue.threadRuns = true
            return true
        }
        // Without a thread (pthread_create failed) this waits here: SIGKILL makes that wait short.
        if startThread { runOnNewThread { waitForQueuedChildren() } }
    }

    /// Whether `pid` has exited (and was reaped now) or is not this process's child any more.
    private static func reapIfExited(_ pid: Int32) -> Bool {
        var status: Int32 = 0
        var result: Int32
        repeat {
            result = waitpid(pid, &status, WNOHANG)
        } while result < 0 && errno == EINTR
        return result != 0  // its pid: reaped; -1 (ECHILD): someone else reaped it
    }

    /// The reaper thread: waits for each queued pid until the queue is empty, then ends.
    private static func waitForQueuedChildren() {
        while let pid = queue.withLock({ queue -> Int32? in
            guard !queue.pids.isEmpty else {
                queue.threadRuns = false
                return nil
            }
            return queue.pids.removeFirst()
        }) {
            var status: Int32 = 0
            var result: Int32
            repeat {
                result = waitpid(pid, &status, 0)
            } while result < 0 && errno == EINTR
        }
    }
}

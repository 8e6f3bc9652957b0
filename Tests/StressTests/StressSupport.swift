import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// A failed expectation inside a stress workload, with what was observed.
struct StressFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Raises the soft limit on open files to at least `needed` (up to the hard limit).
///
/// - Returns: The soft limit now in force.
/// - Throws: When the hard limit is below `needed`, naming both numbers and how to raise it.
@discardableResult
func ensureOpenFileLimit(_ needed: Int) throws -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
        throw StressFailure("getrlimit(RLIMIT_NOFILE) failed: errno \(errno)")
    }
    if limit.rlim_cur >= rlim_t(needed) { return Int(limit.rlim_cur) }
    guard limit.rlim_max == rlim_t.max || limit.rlim_max >= rlim_t(needed) else {
        throw StressFailure("this workload needs \(needed) open files but the hard limit (RLIMIT_NOFILE) is \(limit.rlim_max); "
                            + "raise it (e.g. `ulimit -Hn \(needed)` as root, or LimitNOFILE= for a service) and run again")
    }
    limit.rlim_cur = limit.rlim_max == rlim_t.max ? rlim_t(needed) : limit.rlim_max
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
        throw StressFailure("setrlimit(RLIMIT_NOFILE, \(limit.rlim_cur)) failed: errno \(errno)")
    }
    return Int(limit.rlim_cur)
}

/// The process's resident set size in bytes (`/proc/self/statm`, second field, times the page size).
func residentBytes() throws -> Int {
    let text = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else {
        throw StressFailure("unexpected /proc/self/statm: \(text)")
    }
    return pages * sysconf(Int32(_SC_PAGESIZE))
}

/// The system's count of connections dropped at a full accept queue (TcpExt ListenDrops
/// in `/proc/net/netstat`), or nil if it cannot be read.
func listenDrops() -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/net/netstat", encoding: .utf8) else { return nil }
    let lines = text.split(separator: "\n").filter { $0.hasPrefix("TcpExt:") }
    guard lines.count >= 2 else { return nil }
    let names = lines[0].split(separator: " "), values = lines[1].split(separator: " ")
    guard let index = names.firstIndex(of: "ListenDrops"), index < values.count else { return nil }
    return Int(values[index])
}

/// Bytes allocated and not yet freed (glibc's mallinfo2 over every arena, or the sanitizer's count).
func liveHeapBytes() -> Int { Int(ruv_test_live_heap_bytes()) }

/// `bytes` in MiB with one decimal, for reports.
func mebibytes(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

/// A duration as seconds with one decimal ("25.5 s"), for reports.
func formatted(_ duration: Duration) -> String { String(format: "%.1f s", seconds(duration)) }

/// Seconds in a duration, as a Double.
func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// Shuts `loop` down from a helper thread and waits at most `timeout` for it, so a hang fails instead of stalling.
func shutDown(_ loop: EventLoop, timeout: Duration = .seconds(30)) throws -> ShutdownReport {
    let outcome = Locked<Result<ShutdownReport, EventLoopError>?>(nil)
    // The helper lets go of the loop before reporting, so callers can check that the loop is freed.
    let holder = Locked<EventLoop?>(loop)
    Thread {
        let result = Result { () throws(EventLoopError) -> ShutdownReport in try holder.current!.tryShutdown() }
        holder.withLock { $0 = nil }
        outcome.withLock { $0 = result }
    }.start()
    try waitFor("EventLoop '\(loop.name)' to shut down", timeout: timeout) { outcome.current != nil }
    return try outcome.current!.get()
}

/// Runs `body` on a new, named thread with a small stack (workloads start dozens).
func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread(block: body)
    thread.name = name
    thread.stackSize = 256 << 10
    thread.start()
}

/// Runs `body` in a task and blocks the calling thread until it returned: for a test's own thread
/// (never a loop's or a task's) that must know, say, that `disposeAndWait()` returned. Fails the test
/// if the task has not returned within the hang guard.
func awaitOnThisThread(_ what: String, hangGuard: DispatchTimeInterval = .seconds(60),
                       file: StaticString = #filePath, line: UInt = #line,
                       _ body: @escaping @Sendable () async -> Void) {
    let returned = DispatchSemaphore(value: 0)
    Task {
        await body()
        returned.signal()
    }
    if returned.wait(timeout: .now() + hangGuard) == .timedOut {
        XCTFail("\(what) did not return within the hang guard", file: file, line: line)
    }
}

import CTestSupport
import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Waits until `condition` holds (ReactiveUVTesting's `waitFor`); fails the test at the deadline.
///
/// - Returns: Whether the condition became true.
@discardableResult
func waitUntil(
    _ what: String,
    timeout: Duration = LoopHarness.defaultTimeout,
    file: StaticString = #filePath,
    line: UInt = #line,
    _ condition: () -> Bool
) -> Bool {
    do {
        try waitFor(what, timeout: timeout, condition)
        return true
    } catch {
        XCTFail("\(error)", file: file, line: line)
        return false
    }
}

/// Runs `body` on the loop thread and waits for its result.
func onLoop<T: Sendable>(_ loop: EventLoop, timeout: Duration = LoopHarness.defaultTimeout, file: StaticString = #filePath, line: UInt = #line,
                         _ body: @escaping @Sendable () -> T) -> T? {
    let result = Locked<T?>(nil)
    loop.execute { let value = body(); result.withLock { $0 = value } }
    guard waitUntil("work on loop '\(loop.name)'", timeout: timeout, file: file, line: line, { result.current != nil }) else { return nil }
    return result.current
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

/// Starts `count` threads running `body(index)` and waits for all of them.
func runConcurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    group.wait()
}

/// Runs `body` on a new thread (one that owns no loop) and waits for it.
func onNewThread(_ body: @escaping @Sendable () -> Void) {
    runConcurrently(1) { _ in body() }
}

/// Milliseconds in a duration, as a Double.
func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

/// Bytes the process has allocated and not yet freed, in MiB.
///
/// Memory-bound tests measure this rather than resident memory: under the
/// address sanitizer freed blocks sit in a quarantine of up to 256 MiB and
/// shadow memory grows with every address ever touched, so resident memory
/// says little about what our code holds. See `ruv_test_live_heap_bytes`.
func liveHeapMegabytes() -> Double {
    Double(ruv_test_live_heap_bytes()) / 1_048_576
}

/// Runs `body` as an unprivileged user when the tests run as root (as CI does), so
/// permission checks (EACCES) really happen; as anyone else it just runs `body`.
///
/// Root keeps its saved user id, so the effective ids (`nobody`, 65534) are set back
/// to 0 afterwards. glibc applies `seteuid` to every thread of the process, so loop
/// threads and libuv's thread pool check permissions as `nobody` too, and dropping
/// the effective user id clears the effective capabilities (CAP_NET_BIND_SERVICE,
/// CAP_DAC_OVERRIDE) until it is restored.
///
/// With `supplementaryGroups` (as root only), `nobody` also belongs to those groups while
/// `body` runs (`setgroups`, which glibc applies to every thread too); root's own are put back after.
func withoutRootPrivileges<R>(supplementaryGroups: [gid_t]? = nil, _ body: () throws -> R) throws -> R {
    guard geteuid() == 0 else { return try body() }
    var rootsGroups: [gid_t]?
    if let groups = supplementaryGroups {
        rootsGroups = try supplementaryGroupsOfThisProcess()
        guard setgroups(groups.count, groups) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM) }
    }
    defer {
        // Runs after the effective ids are root again (defers run last first).
        if let rootsGroups {
            precondition(setgroups(rootsGroups.count, rootsGroups) == 0, "could not restore root's supplementary groups")
        }
    }
    guard setegid(65534) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM) }
    guard seteuid(65534) == 0 else {
        let code = errno
        _ = setegid(0)
        throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EPERM)
    }
    defer {
        let restored = seteuid(0) == 0 && setegid(0) == 0
        precondition(restored, "could not restore root after dropping privileges")
    }
    return try body()
}

/// This process's supplementary group IDs (`getgroups`).
func supplementaryGroupsOfThisProcess() throws -> [gid_t] {
    let count = getgroups(0, nil)
    guard count >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EINVAL) }
    var groups = [gid_t](repeating: 0, count: Int(count))
    let read = getgroups(count, &groups)
    guard read >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EINVAL) }
    return Array(groups.prefix(Int(read)))
}

/// What each of this process's open descriptors names (the targets of the links in `/proc/self/fd`:
/// a path, `socket:[N]`, `pipe:[N]`, `anon_inode:...`).
///
/// A count that could not be taken must never read as "nothing open": where `/proc` is not mounted this
/// throws `XCTSkip` saying so, and where `/proc/self/fd` cannot be read it throws a `TestFailure`.
/// (The descriptor the listing itself opens is closed by the time its link is read, so it is not counted.)
func openDescriptorTargets() throws -> [String] {
    let entries: [String]
    do {
        entries = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")
    } catch {
        if access("/proc/self", F_OK) != 0 {
            throw XCTSkip("/proc is not mounted here, so this process's open descriptors cannot be counted")
        }
        throw TestFailure("cannot read /proc/self/fd to count this process's open descriptors: \(error)")
    }
    return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
}

/// How many of this process's descriptors are open on `path` (read from `/proc/self/fd`; throws where it
/// cannot be read, as `openDescriptorTargets` does).
func descriptorsOpen(on path: String) throws -> Int {
    try openDescriptorTargets().filter { $0 == path }.count
}

/// Waits until `condition` holds, as `waitUntil` does; an error the condition throws ends the wait and is
/// thrown (so a count that cannot be taken fails the test at once rather than reading as a false condition).
func waitUntilOrThrow(_ what: String, timeout: Duration = LoopHarness.defaultTimeout, _ condition: () throws -> Bool) throws {
    let thrown = ConditionFailure()
    try waitFor(what, timeout: timeout) { thrown.holds(condition) }
    try thrown.rethrow()
}

/// What a throwing wait condition threw: `holds` reads an error as "met" (the wait ends) and keeps it,
/// `rethrow` throws it once the wait returned.
private final class ConditionFailure {
    private var error: (any Error)?

    func holds(_ condition: () throws -> Bool) -> Bool {
        do { return try condition() } catch { self.error = error; return true }
    }

    func rethrow() throws {
        if let error { throw error }
    }
}

/// Runs `body` on a fresh `LoopHarness` named `name` (what it throws fails the test), then checks that every
/// handle and request ended and the loop closed cleanly.
func withFinishedHarness(named name: String, _ body: (LoopHarness) async throws -> Void,
                         file: StaticString = #filePath, line: UInt = #line) async {
    let harness = LoopHarness(name: name)
    do {
        try await body(harness)
    } catch {
        XCTFail("\(error)", file: file, line: line)
    }
    let report = harness.finish()
    XCTAssertTrue(report.isClean, "\(report.problems)", file: file, line: line)
}

extension LoopHarness {
    /// `wait(for:until:)` for a condition that can throw: its error ends the wait and is thrown.
    func waitOrThrow(for what: String, until condition: () throws -> Bool) throws {
        let thrown = ConditionFailure()
        try wait(for: what) { thrown.holds(condition) }
        try thrown.rethrow()
    }
}

/// The bytes an instance of `type` asks malloc for: the instance size recorded in its class metadata
/// (on Linux, without Objective-C interop, a 32-bit field 24 bytes into the metadata, after the isa,
/// the superclass, the flags and the instance address point).
func swiftInstanceSize(of type: AnyClass) -> Int {
    Int(unsafeBitCast(type, to: UnsafeRawPointer.self).load(fromByteOffset: 24, as: UInt32.self))
}

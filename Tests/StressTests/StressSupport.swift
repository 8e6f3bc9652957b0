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

/// Waits until `condition` holds, checking it every millisecond; throws at the deadline.
///
/// `observed` describes the state at the deadline, for the failure message.
func waitFor(_ what: String, timeout: Duration, observed: @autoclosure () -> String = "",
             _ condition: () -> Bool) throws {
    let deadline = SchedulerInstant.now + timeout
    while !condition() {
        if SchedulerInstant.now >= deadline {
            throw StressFailure("timed out after \(timeout) waiting for \(what)\(observed().isEmpty ? "" : "; observed: \(observed())")")
        }
        usleep(1000)
    }
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

/// A blocking TCP client on plain POSIX sockets (loopback only), for injecting peer faults from a thread.
final class RawClient: @unchecked Sendable {
    // `descriptor` is immutable; each client is used by one thread at a time.
    let descriptor: Int32

    /// Connects to 127.0.0.1:`port`; reads time out after `receiveTimeout` so a broken server cannot hang a thread.
    init(port: Int, receiveTimeout: Duration = .seconds(20)) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw StressFailure("socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            let code = errno
            Glibc.close(descriptor)
            throw StressFailure("connect to 127.0.0.1:\(port) failed: errno \(code)")
        }
        self.descriptor = descriptor
        setTimeout(SO_RCVTIMEO, receiveTimeout)
    }

    /// The local port (to match this client with the server's reports), or 0 if it cannot be read.
    var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let read = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) == 0 }
        }
        return read ? Int(UInt16(bigEndian: address.sin_port)) : 0
    }

    /// Sets `SO_RCVTIMEO` or `SO_SNDTIMEO`.
    func setTimeout(_ option: Int32, _ duration: Duration) {
        var value = timeval(tv_sec: Int(duration.components.seconds),
                            tv_usec: Int(duration.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends every byte of `bytes[range]`; returns how many were sent before an error or a send timeout.
    @discardableResult
    func send(_ bytes: [UInt8], _ range: Range<Int>? = nil) -> Int {
        let range = range ?? 0..<bytes.count
        var offset = range.lowerBound
        while offset < range.upperBound {
            let sent = bytes.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress! + offset, range.upperBound - offset, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { break }
            offset += sent
        }
        return offset - range.lowerBound
    }

    /// Receives up to `count` bytes into a fresh array: empty at EOF, nil on an error or timeout.
    func receive(upTo count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, count, 0) }
        guard got >= 0 else { return nil }
        buffer.removeLast(count - got)
        return buffer
    }

    /// Receives exactly `count` bytes, or throws on EOF, error or timeout.
    func receive(exactly count: Int) throws -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = result.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + offset, count - offset, 0) }
            guard got > 0 else {
                throw StressFailure(got == 0 ? "EOF after \(offset) of \(count) bytes"
                                             : "recv failed after \(offset) of \(count) bytes: errno \(errno)")
            }
            offset += got
        }
        return result
    }

    /// Reads until EOF; returns the bytes, or throws on an error or timeout.
    func receiveUntilEOF() throws -> [UInt8] {
        var result: [UInt8] = []
        while true {
            guard let chunk = receive(upTo: 65_536) else {
                throw StressFailure("recv failed after \(result.count) bytes: errno \(errno)")
            }
            if chunk.isEmpty { return result }
            result.append(contentsOf: chunk)
        }
    }

    /// Half-closes (FIN): the peer reads EOF, and this side can still read.
    func shutdownWrite() { Glibc.shutdown(descriptor, Int32(SHUT_WR)) }

    /// Closes with RST (`SO_LINGER` 0): whatever is in flight is dropped and the peer sees `ECONNRESET`.
    func reset() {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        Glibc.close(descriptor)
    }

    /// Closes normally (FIN).
    func close() { Glibc.close(descriptor) }
}

/// A deterministic byte pattern that differs per `seed`, so a misplaced or foreign byte is caught.
func pattern(_ count: Int, seed: Int) -> [UInt8] {
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
    var result = [UInt8](repeating: 0, count: count)
    result.withUnsafeMutableBytes { bytes in
        var offset = 0
        while offset < count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            var word = state
            let take = min(8, count - offset)
            withUnsafeBytes(of: &word) { bytes.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: take) }
            offset += take
        }
    }
    return result
}

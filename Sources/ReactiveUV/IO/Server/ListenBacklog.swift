#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A listening socket's queue of connections not yet accepted (`listen(2)`'s backlog), as a server
/// was given it: a number, or nil for the system's maximum.
///
/// The system's maximum is `net.core.somaxconn` (`/proc/sys/net/core/somaxconn`, 4096 since Linux
/// 5.4), read when the server starts; `SOMAXCONN` when it cannot be read. The kernel caps any
/// larger value at it. A burst of clients past the queue is what the default is for: a full
/// `AF_UNIX` queue refuses a client at once (`EAGAIN`) where TCP drops its SYN and lets it retry,
/// so a small queue turns a burst of Unix-socket clients away.
struct ListenBacklog {
    /// What the server was given; nil for the system's maximum.
    let requested: Int32?
    /// What `listen` is given: `requested`, or the system's maximum as read when this was made.
    let value: Int32

    init(_ requested: Int32?) {
        self.requested = requested
        value = requested ?? ListenBacklog.systemMaximum()
    }

    /// `EINVAL` for a backlog below 1 (Linux would take 0 as one connection and a negative one as
    /// the maximum, neither what was written), else nil.
    func refusal(context: String) -> UVError? {
        guard let requested, requested < 1 else { return nil }
        return UVError(code: UVError.invalidArgumentCode,
                       message: "backlog \(requested) is below 1; pass at least 1, or nil for the system's maximum (net.core.somaxconn, \(ListenBacklog.systemMaximum()) here)",
                       context: context)
    }

    /// `net.core.somaxconn`, or `SOMAXCONN` when it cannot be read (no /proc, a sandbox).
    static func systemMaximum() -> Int32 {
        let file = open("/proc/sys/net/core/somaxconn", O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return SOMAXCONN }
        defer { close(file) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
        guard count > 0 else { return SOMAXCONN }
        let text = String(decoding: bytes[..<count], as: UTF8.self)
        guard let digits = text.split(whereSeparator: \.isWhitespace).first, let maximum = Int32(digits), maximum > 0 else {
            return SOMAXCONN
        }
        return maximum
    }
}

internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a polled descriptor is ready for: the set `Poll.readiness(fd:events:on:)` asks for and sends.
///
/// Thread rule: a value type; safe from any thread.
public struct PollEvents: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// The bits; only those of the named values below are valid.
    ///
    /// Thread rule: safe from any thread.
    public let rawValue: UInt32

    /// Creates a set from its bits (an unknown bit makes `Poll.readiness` fail with `EINVAL`).
    ///
    /// Thread rule: safe from any thread.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Data can be read without blocking (or the peer closed: a read returns 0). `UV_READABLE`.
    ///
    /// Thread rule: safe from any thread.
    public static let readable = PollEvents(rawValue: 1 << 0)

    /// Data can be written without blocking. `UV_WRITABLE`.
    ///
    /// Thread rule: safe from any thread.
    public static let writable = PollEvents(rawValue: 1 << 1)

    /// The peer closed or shut down its writing side (`EPOLLRDHUP`; for a pipe libuv reports the
    /// hang-up as every event asked for). `UV_DISCONNECT`.
    ///
    /// Thread rule: safe from any thread.
    public static let disconnect = PollEvents(rawValue: 1 << 2)

    /// Urgent data can be read (`EPOLLPRI`: TCP out-of-band data, a sysfs attribute that changed). `UV_PRIORITIZED`.
    ///
    /// Thread rule: safe from any thread.
    public static let prioritized = PollEvents(rawValue: 1 << 3)

    /// Every event above.
    ///
    /// Thread rule: safe from any thread.
    public static let all: PollEvents = [.readable, .writable, .disconnect, .prioritized]

    private static let names: [(PollEvents, String)] =
        [(.readable, "readable"), (.writable, "writable"), (.disconnect, "disconnect"), (.prioritized, "prioritized")]

    /// `"[readable, disconnect]"`; an unknown bit shows as its value.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        var parts = Self.names.filter { contains($0.0) }.map(\.1)
        let unknown = subtracting(.all)
        if !unknown.isEmpty { parts.append("0x\(String(unknown.rawValue, radix: 16))") }
        return "[" + parts.joined(separator: ", ") + "]"
    }

    /// libuv's `uv_poll_event` bits for this set (only the known ones).
    var libuvFlags: Int32 {
        var flags: UInt32 = 0
        if contains(.readable) { flags |= UV_READABLE.rawValue }
        if contains(.writable) { flags |= UV_WRITABLE.rawValue }
        if contains(.disconnect) { flags |= UV_DISCONNECT.rawValue }
        if contains(.prioritized) { flags |= UV_PRIORITIZED.rawValue }
        return Int32(bitPattern: flags)
    }

    init(libuvFlags flags: Int32) {
        let bits = UInt32(bitPattern: flags)
        var set = PollEvents()
        if bits & UV_READABLE.rawValue != 0 { set.insert(.readable) }
        if bits & UV_WRITABLE.rawValue != 0 { set.insert(.writable) }
        if bits & UV_DISCONNECT.rawValue != 0 { set.insert(.disconnect) }
        if bits & UV_PRIORITIZED.rawValue != 0 { set.insert(.prioritized) }
        self = set
    }
}

/// Readiness of descriptors opened by other code (a socket from a C library, a pipe, a device, a terminal).
///
/// Thread rule: a namespace; its factories are safe from any thread.
public enum Poll {
    /// Sends the ready set each time `fd` is ready for one of `events` (`uv_poll_t`).
    ///
    /// Level-triggered: while the descriptor stays readable, every loop iteration sends `.readable`
    /// again; read what is there, or dispose. It never completes on its own.
    ///
    /// The descriptor stays yours and is never closed, but libuv makes it non-blocking (on the open
    /// file, shared with its duplicates), and it must not be closed while polled (epoll would drop
    /// it silently): close it after the subscription ended.
    ///
    /// Errors (a `UVError` naming the descriptor, at subscription unless said):
    /// - a negative `fd`, an empty or unknown `events` set: `EINVAL`;
    /// - a descriptor that is not open: `EBADF`;
    /// - a regular file or a directory (epoll refuses them): `EPERM`;
    /// - a descriptor this loop already polls (another subscription or a loop handle): `EEXIST`
    ///   (share one subscription with `publish()` or `replay`, or poll on another loop);
    /// - later, an error condition (`POLLERR`: a pipe whose reader closed, a socket error): `EBADF`;
    /// - the loop shutting down: `EventLoopError.shutDown`.
    ///
    /// - Parameters:
    ///   - fd: An open descriptor that supports polling (a socket, pipe, FIFO, terminal, eventfd...).
    ///   - events: What to wait for; at least one event.
    ///   - loop: The loop that polls; nil for the subscription's home loop.
    /// - Returns: A signal of ready sets, each a subset of `events`.
    ///
    /// Thread rule: safe from any thread.
    public static func readiness(fd: Int32, events: PollEvents = .readable, on loop: EventLoop? = nil) -> Signal<PollEvents> {
        Signal { subscriber in
            let context = "Poll.readiness(fd: \(fd))"
            guard fd >= 0 else {
                subscriber.sendError(UVError(code: UVError.invalidArgumentCode,
                                             message: "a file descriptor is never negative, got \(fd)", context: context))
                return nil
            }
            guard !events.isEmpty, events.isSubset(of: .all) else {
                subscriber.sendError(UVError(
                    code: UVError.invalidArgumentCode,
                    message: "events must name at least one of \(PollEvents.all) and nothing else, got \(events)",
                    context: context))
                return nil
            }
            return LoopBinding.open(on: loop, for: subscriber, what: "Poll.readiness", refusingSimulation: "Poll") { loop in
                let handle = PollHandle(loop: loop, descriptor: fd, subscriber: subscriber)
                return LoopBinding.started(handle, for: subscriber) { try handle.start(events: events) }
            }
        }.debugNamed("+Poll.readiness(fd: \(fd), \(events))")
    }
}

/// One `uv_poll_t` on a descriptor it does not own, feeding a subscriber: the poll family's backend seam.
/// Thread rule: loop thread only, except `init` and `dispose()`.
final class PollHandle: SubscriberHandle<PollEvents>, @unchecked Sendable {
    // Sendable: `descriptor` is immutable; the rest is loop thread only (see `SubscriberHandle`).
    private let descriptor: Int32

    init(loop: EventLoop, descriptor: Int32, subscriber: Subscriber<PollEvents>) {
        self.descriptor = descriptor
        super.init(loop: loop, byteCount: uv_handle_size(UV_POLL), subscriber: subscriber)
    }

    override var label: String { "poll on fd \(descriptor) from Poll.readiness" }

    private var context: String { "Poll.readiness(fd: \(descriptor))" }

    func start(events: PollEvents) throws(UVError) {
        try checkDescriptor()
        let handle = pointer(as: uv_poll_t.self)
        let status = uv_poll_init(loop.uvLoop, handle, descriptor)
        if status == UV_EEXIST.rawValue {
            throw UVError(code: status, message: """
                fd \(descriptor) is already polled on loop '\(loop.name)' (by another Poll.readiness subscription \
                or a handle of the loop): libuv allows one poll handle per descriptor per loop; \
                share one subscription (publish, replay) or poll on another loop
                """, context: context)
        }
        if status == UV_EPERM.rawValue {
            throw UVError(code: status, message: "fd \(descriptor) does not support polling (epoll refuses it)", context: context)
        }
        try uvCheck(status, "uv_poll_init(fd \(descriptor))")
        didOpen()
        do {
            try uvCheck(uv_poll_start(handle, events.libuvFlags, pollCallback), "uv_poll_start(fd \(descriptor), \(events))")
        } catch {
            closeHandle()
            throw error
        }
    }

    /// What libuv does not check, or answers with a bare code: is the descriptor open, and pollable?
    private func checkDescriptor() throws(UVError) {
        guard fcntl(descriptor, F_GETFD) != -1 else {
            let code = errno
            throw UVError(code: -code, message: code == EBADF
                ? "fd \(descriptor) is not an open file descriptor"
                : UVError.libuvMessage(for: -code), context: context)
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            throw UVError(code: -code, context: "fstat(fd \(descriptor))")
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFREG || type == S_IFDIR {
            let what = type == S_IFREG ? "a regular file" : "a directory"
            throw UVError(code: UV_EPERM.rawValue, message: """
                fd \(descriptor) is \(what): regular files and directories are always ready \
                and cannot be polled (epoll refuses them); read them with Files
                """, context: context)
        }
    }

    fileprivate func deliver(status: Int32, events: Int32) {
        guard status >= 0 else {
            fail(pollError(status))
            return
        }
        subscriber?.sendNext(PollEvents(libuvFlags: events))
    }

    /// libuv reports `POLLERR` as `EBADF` (and stops the handle): say which it was.
    private func pollError(_ status: Int32) -> UVError {
        guard status == UV_EBADF.rawValue else { return UVError(code: status, context: "polling fd \(descriptor)") }
        if fcntl(descriptor, F_GETFD) == -1 {
            return UVError(code: status, message: "fd \(descriptor) was closed while polled", context: context)
        }
        return UVError(code: status, message: """
            fd \(descriptor) reported an error condition (POLLERR): a pipe whose reading end is closed, \
            or a socket with an error pending (SO_ERROR)
            """, context: context)
    }

    override func willClose() {
        // Stops polling; the descriptor belongs to the caller and stays open.
        uvCheckReporting(uv_poll_stop(pointer(as: uv_poll_t.self)), "uv_poll_stop(fd \(descriptor))")
    }
}

private let pollCallback: uv_poll_cb = { handle, status, events in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<PollHandle>.fromOpaque(data).takeUnretainedValue().deliver(status: status, events: events)
}

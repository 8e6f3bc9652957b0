internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One event read from an inotify instance.
struct InotifyEvent {
    /// The watch descriptor (-1 for `IN_Q_OVERFLOW`).
    let descriptor: Int32
    /// The `IN_*` bits.
    let mask: UInt32
    /// What ties the two halves of a rename (`IN_MOVED_FROM`, `IN_MOVED_TO`); 0 for other events.
    let cookie: UInt32
    /// The entry's name inside a watched directory; empty when the event is about the watched inode itself.
    let name: String
    /// Whether `name` is the entry's name exactly: false when it is not valid UTF-8 (`name` then shows
    /// U+FFFD for what is not, and names no file).
    let nameIsExact: Bool

    func has(_ bits: Int32) -> Bool { mask & UInt32(bitPattern: bits) != 0 }
}

/// What a file watch session does with the events of its watches.
protocol InotifyOwner: AnyObject {
    /// An event on one of the descriptors this owner added (also `IN_IGNORED`, after which the descriptor is gone).
    func inotify(_ event: InotifyEvent)
    /// The two halves of one rename, both on descriptors this owner added (`from` is `IN_MOVED_FROM`, `to` its
    /// `IN_MOVED_TO`). An owner holding only one of the descriptors hears that half through `inotify(_:)`.
    func inotifyMoved(from: InotifyEvent, to: InotifyEvent)
    /// The kernel's queue overflowed: events of every watch of the instance were lost.
    func inotifyOverflowed()
    /// The instance failed (a read error) or its loop is shutting down: the owner must end.
    func inotifyEnded(_ error: any Error)
}

/// The inotify instance a loop's file watches share, read through a `uv_poll` handle:
/// `FileWatch.changes`'s side of the watch family's backend seam (`FilePollHandle` is
/// `FileWatch.poll`'s). `FileWatchSession` adds and removes watches here and hears events
/// through `InotifyOwner`; it reads the file system itself (`FileSystemQuery`, `WatchedTree`).
///
/// Why not `uv_fs_event`: libuv 1.44 drops `IN_Q_OVERFLOW` (events lost without
/// notice) and names a watched directory's own events (`chmod`, deletion) like a
/// child's, so a watcher cannot tell them apart. Why shared: each instance counts
/// against `fs.inotify.max_user_instances` (128 by default, per user), as libuv
/// also keeps one per loop. The kernel returns the same descriptor when the same
/// inode (device and inode number) is watched twice in one instance, so owners are
/// counted per descriptor and the watch is removed when the last one leaves.
///
/// Memory: the handle memory is freed in the close callback; the inotify file
/// descriptor is closed there too (after libuv stopped polling it), which also
/// drops every kernel watch it still held.
final class InotifyHub: LoopHandle, @unchecked Sendable {  // loop thread only; the release timer runs there too
    // Loop thread only: each loop's thread alone reads and writes its own key of `hubs`.
    private static let hubs = LockedValue<[ObjectIdentifier: HubReference]>([:])
    private struct HubReference: @unchecked Sendable {  // handed out only to the hub's own loop thread (key above)
        let hub: InotifyHub
    }

    /// The watch mask for every descriptor: one mask, because a second `inotify_add_watch`
    /// of the same inode in the instance replaces it (each owner filters what it needs).
    private static let watchMask = UInt32(bitPattern: IN_ATTRIB | IN_CREATE | IN_MODIFY | IN_DELETE | IN_DELETE_SELF
        | IN_MOVE_SELF | IN_MOVED_FROM | IN_MOVED_TO)
    static let bufferSize = 16 * 1024
    /// Reads per poll callback: a flood of events must not keep the loop from its other work.
    private static let readsPerCallback = 64

    private let descriptor: Int32
    private var owners: [Int32: [ObjectIdentifier: any InotifyOwner]] = [:]
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: InotifyHub.bufferSize, alignment: 8)
    private var pairing = InotifyMovePairing()
    /// Reports a move's first half alone when no read brought its second half in time.
    private var heldHalfTimer: (timer: any Disposable, cookie: UInt32)?

    /// The loop's hub, opened on first use.
    ///
    /// - Throws: `EMFILE` naming `fs.inotify.max_user_instances` when no instance can be opened.
    static func shared(on loop: EventLoop) throws(UVError) -> InotifyHub {
        let key = ObjectIdentifier(loop)
        if let hub = hubs.withLock({ $0[key]?.hub }), hub.isHandleOpen { return hub }
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else {
            let code = errno
            throw UVError(code: -code, message: code == EMFILE
                ? "no inotify instance left: the limit fs.inotify.max_user_instances (\(kernelLimit("max_user_instances"))) or the open-file limit was reached"
                : UVError.libuvMessage(for: -code), context: "inotify_init1")
        }
        let hub = InotifyHub(loop: loop, descriptor: descriptor)
        try hub.start()
        hubs.withLock { $0[key] = HubReference(hub: hub) }
        return hub
    }

    private init(loop: EventLoop, descriptor: Int32) {
        self.descriptor = descriptor
        super.init(loop: loop, byteCount: uv_handle_size(UV_POLL))
    }

    deinit { buffer.deallocate() }

    override var label: String { "inotify instance (\(owners.count) watches) from FileWatch.changes" }

    private func start() throws(UVError) {
        let handle = pointer(as: uv_poll_t.self)
        do {
            try uvCheck(uv_poll_init(loop.uvLoop, handle, descriptor), "uv_poll_init(inotify)")
        } catch {
            closeFileDescriptor(descriptor)
            throw error
        }
        didOpen()
        do {
            try uvCheck(uv_poll_start(handle, Int32(UV_READABLE.rawValue), inotifyReadableCallback), "uv_poll_start(inotify)")
        } catch {
            closeHandle()
            throw error
        }
    }

    /// Watches `path` for `owner` and returns the descriptor (the same one for an inode already watched).
    ///
    /// - Parameters:
    ///   - onlyDirectory: Fail with `ENOTDIR` unless it is a directory (`IN_ONLYDIR`).
    ///   - followLink: Watch what a symbolic link points to rather than failing (without `IN_DONT_FOLLOW`).
    /// - Throws: The `errno` of `inotify_add_watch`; `ENOSPC` names `fs.inotify.max_user_watches`.
    func addWatch(_ path: String, for owner: any InotifyOwner, onlyDirectory: Bool, followLink: Bool) throws(UVError) -> Int32 {
        var mask = Self.watchMask
        if onlyDirectory { mask |= UInt32(bitPattern: IN_ONLYDIR) }
        if !followLink { mask |= UInt32(bitPattern: IN_DONT_FOLLOW) }
        return try addWatch(path, mask: mask, named: path, for: owner)
    }

    /// Watches the directory open as `directory` for `owner`, through its `/proc/self/fd` entry: the kernel
    /// resolves no path of the tree again, so a component swapped for a symbolic link since the directory
    /// was opened cannot lead the watch elsewhere. `path` names it in errors.
    ///
    /// - Throws: As `addWatch(_:for:onlyDirectory:followLink:)`; `ENOSYS` when `/proc` is not mounted.
    func addWatch(directory: Int32, named path: String, for owner: any InotifyOwner) throws(UVError) -> Int32 {
        do {
            return try addWatch("/proc/self/fd/\(directory)", mask: Self.watchMask | UInt32(bitPattern: IN_ONLYDIR), named: path, for: owner)
        } catch where error.code == UV_ENOENT.rawValue {
            // The descriptor is open: only a missing /proc makes its entry missing.
            throw UVError(code: UV_ENOSYS.rawValue,
                          message: "cannot watch \(path) by its descriptor: /proc/self/fd is not there (a recursive watch needs /proc mounted)",
                          context: "inotify_add_watch")
        }
    }

    private func addWatch(_ target: String, mask: UInt32, named path: String, for owner: any InotifyOwner) throws(UVError) -> Int32 {
        let watch = inotify_add_watch(descriptor, target, mask)
        guard watch >= 0 else {
            let code = errno
            if code == ENOSPC {
                throw UVError(code: -code, message: "cannot watch \(path): the inotify watch limit fs.inotify.max_user_watches (\(Self.kernelLimit("max_user_watches"))) is reached",
                              context: "inotify_add_watch")
            }
            throw UVError(code: -code, context: "watch \(path)")
        }
        owners[watch, default: [:]][ObjectIdentifier(owner)] = owner
        return watch
    }

    /// Gives up `owner`'s share of the watch; the kernel watch goes with the last share.
    func removeWatch(_ watch: Int32, for owner: any InotifyOwner) {
        guard var shares = owners[watch], shares.removeValue(forKey: ObjectIdentifier(owner)) != nil else { return }
        if shares.isEmpty {
            owners[watch] = nil
            // EINVAL when the kernel already dropped it (its IN_IGNORED not read yet): nothing left to remove.
            _ = inotify_rm_watch(descriptor, watch)
        } else {
            owners[watch] = shares
        }
        if owners.isEmpty { closeHandle() }
    }

    /// Closes the hub when no watch is left (an owner whose first watch failed never added one).
    func closeIfUnused() {
        if owners.isEmpty { closeHandle() }
    }

    override func willClose() {
        heldHalfTimer?.timer.dispose()
        heldHalfTimer = nil
        uvCheckReporting(uv_poll_stop(pointer(as: uv_poll_t.self)), "uv_poll_stop(inotify)")
        let key = ObjectIdentifier(loop)
        Self.hubs.withLock { if $0[key]?.hub === self { $0[key] = nil } }
    }

    override func didClose() {
        // libuv no longer polls the descriptor: closing it drops the kernel's watches.
        closeFileDescriptor(descriptor)
        owners.removeAll()
    }

    override func closeForShutdown() {
        end(EventLoopError.shutDown(loop: loop.name))
        closeHandle()
    }

    /// Tells every owner the instance is finished.
    private func end(_ error: any Error) {
        let everyone = allOwners()
        owners.removeAll()
        for owner in everyone { owner.inotifyEnded(error) }
    }

    private func allOwners() -> [any InotifyOwner] {
        var seen: [ObjectIdentifier: any InotifyOwner] = [:]
        for shares in owners.values { seen.merge(shares) { first, _ in first } }
        return Array(seen.values)
    }

    fileprivate func readable(status: Int32) {
        guard status >= 0 else {
            end(UVError(code: status, context: "polling the inotify instance"))
            closeHandle()
            return
        }
        for _ in 0..<Self.readsPerCallback {
            guard isHandleOpen else { return }
            let count = read(descriptor, buffer, Self.bufferSize)
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { break }
                end(UVError(code: -code, context: "reading the inotify instance"))
                closeHandle()
                return
            }
            dispatch(count)
        }
        if isHandleOpen { waitForHeldHalf() }
    }

    /// Hands each event of the buffer to the owners of its descriptor (owners may leave while it runs), a
    /// rename's two halves together (`InotifyMovePairing`).
    private func dispatch(_ count: Int) {
        let headerSize = 16  // int wd; uint32_t mask, cookie, len; then `len` bytes of NUL-padded name
        var offset = 0
        while offset + headerSize <= count, isHandleOpen {
            let watch = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let cookie = buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            let nameLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let namePointer = (buffer + offset + headerSize).assumingMemoryBound(to: UInt8.self)
            let nameBytes = UnsafeBufferPointer(start: namePointer, count: min(nameLength, count - offset - headerSize))
            let bytes = nameBytes.prefix { $0 != 0 }
            // Validated once; decoded again, with U+FFFD, only for a name that is not UTF-8.
            let exact = String(validating: bytes, as: UTF8.self)
            offset += headerSize + nameLength
            let event = InotifyEvent(descriptor: watch, mask: mask, cookie: cookie,
                                     name: exact ?? String(decoding: bytes, as: UTF8.self), nameIsExact: exact != nil)
            // A watch already given up: its events neither reach anyone nor part a rename's halves.
            guard event.has(IN_Q_OVERFLOW) || owners[watch] != nil else { continue }
            let (released, ready) = pairing.next(event)
            if let released { deliver(released) }
            switch ready {
            case .single(let event)?: deliver(event)
            case .move(let from, let to)?: deliver(from: from, to: to)
            case nil: break
            }
        }
    }

    /// One event to the owners of its descriptor (looked up now: an earlier delivery may have removed them).
    private func deliver(_ event: InotifyEvent) {
        guard isHandleOpen else { return }
        if event.has(IN_Q_OVERFLOW) {
            for owner in allOwners() { owner.inotifyOverflowed() }
            return
        }
        guard let shares = owners[event.descriptor] else { return }
        if event.has(IN_IGNORED) {
            // The kernel dropped the watch (the inode is gone, or its file system unmounted).
            owners[event.descriptor] = nil
        }
        for owner in shares.values { owner.inotify(event) }
        if owners.isEmpty { closeHandle() }
    }

    /// A rename's two halves: together to the owners of both descriptors, each alone to the owners of one.
    private func deliver(from: InotifyEvent, to: InotifyEvent) {
        guard isHandleOpen else { return }
        let fromShares = owners[from.descriptor] ?? [:]
        let toShares = owners[to.descriptor] ?? [:]
        for (key, owner) in fromShares {
            if toShares[key] != nil { owner.inotifyMoved(from: from, to: to) } else { owner.inotify(from) }
        }
        for (key, owner) in toShares where fromShares[key] == nil { owner.inotify(to) }
        if owners.isEmpty { closeHandle() }
    }

    /// A move's first half that ended the reads: its second half may still be on its way into the queue (the
    /// kernel queues the two one after the other), so it waits for the next read, but not beyond `moveHalfWait`.
    private func waitForHeldHalf() {
        guard let held = pairing.held else {
            heldHalfTimer?.timer.dispose()
            heldHalfTimer = nil
            return
        }
        guard heldHalfTimer?.cookie != held.cookie else { return }
        heldHalfTimer?.timer.dispose()
        heldHalfTimer = nil
        // At shutdown the hub closes and tells its owners; nothing is left to report the half to.
        guard let timer = loop.scheduleTimer(after: FileWatch.moveHalfWait, { [self] in releaseHeldHalf(cookie: held.cookie) }) else { return }
        heldHalfTimer = (timer, held.cookie)
    }

    private func releaseHeldHalf(cookie: UInt32) {
        guard heldHalfTimer?.cookie == cookie else { return }
        heldHalfTimer = nil
        guard isHandleOpen, pairing.held?.cookie == cookie, let held = pairing.release() else { return }
        deliver(held)
    }

    /// A `/proc/sys/fs/inotify` limit, or "unknown" when it cannot be read.
    static func kernelLimit(_ name: String) -> String {
        let file = open("/proc/sys/fs/inotify/" + name, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return "unknown" }
        defer { closeFileDescriptor(file) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
        guard count > 0 else { return "unknown" }
        return String(decoding: bytes[..<count], as: UTF8.self).filter(\.isNumber)
    }
}

/// `close(2)`, out of reach of `LoopHandle.close()`.
private func closeFileDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

private let inotifyReadableCallback: uv_poll_cb = { handle, status, _ in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<InotifyHub>.fromOpaque(data).takeUnretainedValue().readable(status: status)
}

internal import CLibUV

/// One libuv handle as the object that owns it stores it: its memory and its loop. A value in
/// the owner (`LoopHandleOwner`), beside the handle's `LoopHandleState`, as a NIO channel owns its
/// socket: no object of its own.
///
/// The life of a handle:
/// 1. `init` allocates the memory (on any thread): the handle's links in the loop's list of
///    open handles (`OpenHandleList`), then `uv_handle_size(type)` bytes for libuv.
/// 2. On the loop thread the owner calls `uv_<type>_init`, then `didOpen()`, which stores the
///    retained owner in `handle.data` and links the handle into `loop.openHandleList`.
/// 3. `closeHandle()` calls `uv_close`; only in libuv's close callback is the memory freed, the
///    retain released, and the owner's `didClose()` called.
///
/// The handle families' common backend seam: a second backend keeps its own record of a handle
/// here and answers `didOpen`, `closeHandle` and the close callback for it.
///
/// Thread rule: immutable; safe from any thread (the memory is the loop thread's once opened).
struct LoopHandleCell {
    /// The loop the handle lives on (kept alive by the handle).
    let loop: EventLoop
    /// The links, then libuv's handle; freed in the close callback.
    let memory: UnsafeMutableRawPointer

    /// Memory for a handle of `byteCount` bytes on `loop`.
    init(loop: EventLoop, byteCount: Int) {
        self.memory = LibUVMemory.allocate(OpenHandleList.linksSize + byteCount)
        self.loop = loop
    }

    /// The handle as libuv's base type.
    var handle: UnsafeMutablePointer<uv_handle_t> {
        (memory + OpenHandleList.linksSize).assumingMemoryBound(to: uv_handle_t.self)
    }
}

/// Where a handle's life stands (`LoopHandleOwner.handleState`). Loop thread only.
enum LoopHandleState: UInt8 {
    case unopened, open, closing, closed
}

/// An object that owns one libuv handle (`handleCell`): a connection, a listener, a signal's source.
///
/// The loop reaches its owners through `OpenHandleList`: to close them at shutdown and to name them
/// in `openHandles()`. Everything else is the protocol extension's, specialized for each owner.
///
/// Thread rule: loop thread only, except `loop`.
protocol LoopHandleOwner: AnyObject {
    /// The handle, stored in the owner (immutable: its loop is read without a retain).
    var handleCell: LoopHandleCell { get }
    /// Where the handle's life stands, stored in the owner after its `handleCell`.
    var handleState: LoopHandleState { get set }
    /// What created the handle, for leak reports ("timer from schedule(after: 3600s)").
    var label: String { get }
    /// Called once, just before `uv_close`: stop whatever the handle was doing.
    func willClose()
    /// Called by the loop's shutdown for a handle still open; it must leave the handle closing.
    /// Owners behind a signal tell their subscriber the loop went away first.
    func closeForShutdown()
    /// Called once, after libuv released the handle: drop callbacks and captured state.
    func didClose()
    /// The `uv_close` callback, `finishClose(_:)` for this owner's type (a C callback is not generic).
    static var closeCallback: uv_close_cb { get }
}

extension LoopHandleOwner {
    /// The loop the handle lives on.
    ///
    /// Thread rule: safe from any thread (immutable).
    @inline(__always)
    var loop: EventLoop { handleCell.loop }

    /// `loop` as `EventLoop.inEventLoop` compares it, without a retain.
    ///
    /// Thread rule: safe from any thread.
    @inline(__always)
    var loopIdentity: UnsafeMutableRawPointer { Unmanaged.passUnretained(handleCell.loop).toOpaque() }

    /// `loop.inEventLoop`, without retaining the loop around the thread-local lookup.
    ///
    /// Thread rule: safe from any thread.
    @inline(__always)
    var onLoopThread: Bool { ThreadLocals.currentLoop.value == loopIdentity }

    /// The handle as libuv's base type.
    @inline(__always)
    var handle: UnsafeMutablePointer<uv_handle_t> { handleCell.handle }

    /// The handle as a concrete libuv type.
    @inline(__always)
    func pointer<T>(as type: T.Type) -> UnsafeMutablePointer<T> {
        UnsafeMutableRawPointer(handleCell.handle).assumingMemoryBound(to: T.self)
    }

    /// libuv's name for the handle's type ("timer", "tcp"), once opened.
    var kind: String {
        guard handleState != .unopened else { return "unopened" }
        return String(cString: uv_handle_type_name(handle.pointee.type))
    }

    /// Whether the handle is open (initialized and not yet closing).
    @inline(__always)
    var isHandleOpen: Bool { handleState == .open }

    /// What the owner's `deinit` calls: a handle libuv still points into must not die with its owner.
    func ownerWillDie() {
        assert(handleState == .closed || handleState == .unopened,
               "\(label) was released while libuv still owned its handle (\(handleState)): it must be closed first")
        if handleState == .unopened { LibUVMemory.free(handleCell.memory) }
    }

    /// Marks the handle initialized: retains the owner in `handle.data` and lists it with the loop.
    /// Call right after `uv_<type>_init` succeeded.
    func didOpen() {
        assertInEventLoop()
        assert(handleState == .unopened, "didOpen() called twice")
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        handleState = .open
        loop.openHandleList.insert(handleCell.memory)
    }

    /// Starts closing the handle; the memory is freed when libuv calls back. Idempotent.
    func closeHandle() {
        assertInEventLoop()
        guard handleState == .open else { return }
        handleState = .closing
        loop.openHandleList.remove(handleCell.memory)
        willClose()
        uv_close(handle, Self.closeCallback)
    }

    /// The close callback's body: the handle is libuv's no more.
    static func finishClose(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
        guard let data = handle?.pointee.data else { return }
        // Balances the retain in `didOpen()`: after this the owner may die.
        let owner = Unmanaged<Self>.fromOpaque(data).takeRetainedValue()
        owner.handleState = .closed
        LibUVMemory.free(owner.handleCell.memory)
        owner.didClose()
    }
}

/// The loop's list of open handles (`EventLoop.openHandleList`), linked through the first
/// `linksSize` bytes of each handle's memory: any owner type, and no field for it in the owner.
///
/// Thread rule: confined to its loop's thread.
struct OpenHandleList {
    /// A handle's neighbours: the memory of the handles opened just after and just before it.
    private struct Links {
        var next: UnsafeMutableRawPointer?
        var previous: UnsafeMutableRawPointer?
    }

    /// Bytes before libuv's handle; a multiple of 16, so the handle keeps malloc's alignment.
    static let linksSize = 16

    private var head: UnsafeMutableRawPointer?

    init() {}

    var isEmpty: Bool { head == nil }

    private static func links(_ memory: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Links> {
        memory.assumingMemoryBound(to: Links.self)
    }

    /// The owner of the handle in `memory` (its `data`, set by `didOpen()`).
    private static func owner(_ memory: UnsafeMutableRawPointer) -> (any LoopHandleOwner)? {
        let handle = (memory + linksSize).assumingMemoryBound(to: uv_handle_t.self)
        guard let data = handle.pointee.data else { return nil }
        return Unmanaged<AnyObject>.fromOpaque(data).takeUnretainedValue() as? any LoopHandleOwner
    }

    /// Links a handle (in no list) at the front.
    mutating func insert(_ memory: UnsafeMutableRawPointer) {
        Self.links(memory).initialize(to: Links(next: head, previous: nil))
        if let head { Self.links(head).pointee.previous = memory }
        head = memory
    }

    /// Unlinks a handle that is in the list.
    mutating func remove(_ memory: UnsafeMutableRawPointer) {
        let links = Self.links(memory).pointee
        if let previous = links.previous { Self.links(previous).pointee.next = links.next } else { head = links.next }
        if let next = links.next { Self.links(next).pointee.previous = links.previous }
        Self.links(memory).pointee = Links()
    }

    /// The owner of the most recently opened handle.
    var first: (any LoopHandleOwner)? { head.flatMap(Self.owner) }

    /// Every owner, most recent first (the list must not change meanwhile).
    var owners: [any LoopHandleOwner] {
        var found: [any LoopHandleOwner] = []
        var cursor = head
        while let memory = cursor {
            if let owner = Self.owner(memory) { found.append(owner) }
            cursor = Self.links(memory).pointee.next
        }
        return found
    }
}

/// An object that owns a handle and nothing more of it: the base of the handle sources that are
/// not connections (listeners, a signal's handle, the inotify hub, a child process).
///
/// Thread rule: loop thread only, except `init` and `loop`.
class LoopHandle: LoopHandleOwner {
    final let handleCell: LoopHandleCell
    // Last, so a subclass's one-byte fields fill the word it starts (declaration order is layout order).
    @exclusivity(unchecked) final var handleState = LoopHandleState.unopened

    /// Allocates memory for a handle of `byteCount` bytes.
    init(loop: EventLoop, byteCount: Int) {
        handleCell = LoopHandleCell(loop: loop, byteCount: byteCount)
    }

    deinit { ownerWillDie() }

    /// What created this handle, for leak reports.
    var label: String { kind }

    func willClose() {}

    func closeForShutdown() { closeHandle() }

    func didClose() {}

    static var closeCallback: uv_close_cb { loopHandleCloseCallback }
}

private let loopHandleCloseCallback: uv_close_cb = { LoopHandle.finishClose($0) }

/// A description of a handle that is open on a loop.
///
/// Thread rule: a value type; safe from any thread.
public struct OpenHandle: Sendable, Hashable, CustomStringConvertible {
    /// libuv's type name: "timer", "tcp", "fs_event", ...
    public let kind: String
    /// What opened it, when ReactiveUV did ("timer from schedule(after: 3600s)"); nil for handles opened by other code.
    public let label: String?
    /// Whether the handle is active (a started timer, a reading stream).
    public let isActive: Bool
    /// Whether the handle keeps the loop alive (`uv_has_ref`).
    public let isReferenced: Bool

    /// `"timer from schedule(after: 3600s) (active)"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        let name = label ?? "\(kind) (not opened by ReactiveUV)"
        return isActive ? "\(name) (active)" : name
    }
}

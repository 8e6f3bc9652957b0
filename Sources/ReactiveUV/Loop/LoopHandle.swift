internal import CLibUV

/// One libuv handle as its owner stores it (a value, as a NIO channel owns its socket): its
/// memory and its loop.
///
/// `init` allocates the memory (any thread): the links in the loop's `OpenHandleList`, then
/// libuv's handle. On the loop thread the owner calls `uv_<type>_init`, then `didOpen()`.
/// `closeHandle()` calls `uv_close`; only the close callback frees the memory and the owner.
/// A second backend plugs in here, answering `didOpen`, `closeHandle` and the close callback.
/// Thread rule: immutable; safe from any thread (the memory is the loop thread's once opened).
struct LoopHandleCell {
    /// The loop the handle lives on (kept alive by the handle).
    let loop: EventLoop
    /// The links, then libuv's handle; freed in the close callback.
    let memory: UnsafeMutableRawPointer

    init(loop: EventLoop, byteCount: Int) {
        self.memory = LibUVMemory.allocate(OpenHandleList.linksSize + byteCount)
        self.loop = loop
    }

    var handle: UnsafeMutablePointer<uv_handle_t> {
        (memory + OpenHandleList.linksSize).assumingMemoryBound(to: uv_handle_t.self)
    }
}

/// Where a handle's life stands. Loop thread only.
enum LoopHandleState: UInt8 {
    case unopened, open, closing, closed
}

/// An object that owns one libuv handle (`handleCell`): a connection, a listener, a signal's source.
/// The loop reaches owners through `OpenHandleList`, to close them at shutdown and list them.
/// Thread rule: loop thread only, except `loop`.
protocol LoopHandleOwner: AnyObject {
    /// The handle (immutable: its loop is read without a retain).
    var handleCell: LoopHandleCell { get }
    var handleState: LoopHandleState { get set }
    /// What created the handle, for leak reports ("timer from schedule(after: 3600s)").
    var label: String { get }
    /// Called once, just before `uv_close`: stop whatever the handle was doing.
    func willClose()
    /// Called by shutdown for a handle still open; it must leave the handle closing (after
    /// telling a signal's subscriber the loop went away).
    func closeForShutdown()
    /// Called once, after libuv released the handle: drop callbacks and captured state.
    func didClose()
    /// The `uv_close` callback, `finishClose(_:)` for this owner's type (a C callback is not generic).
    static var closeCallback: uv_close_cb { get }
}

extension LoopHandleOwner {
    /// The loop the handle lives on.
    /// Thread rule: safe from any thread (immutable).
    @inline(__always)
    var loop: EventLoop { handleCell.loop }

    /// `loop` as `EventLoop.inEventLoop` compares it, without a retain.
    /// Thread rule: safe from any thread.
    @inline(__always)
    var loopIdentity: UnsafeMutableRawPointer { Unmanaged.passUnretained(handleCell.loop).toOpaque() }

    /// `loop.inEventLoop`, without retaining the loop around the thread-local lookup.
    /// Thread rule: safe from any thread.
    @inline(__always)
    var onLoopThread: Bool { ThreadLocals.currentLoop.value == loopIdentity }

    @inline(__always)
    var handle: UnsafeMutablePointer<uv_handle_t> { handleCell.handle }

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

    /// Called by the owner's `deinit`: a handle libuv still points into must not die with its owner.
    func ownerWillDie() {
        assert(handleState == .closed || handleState == .unopened,
               "\(label) was released while libuv still owned its handle (\(handleState)): it must be closed first")
        if handleState == .unopened { LibUVMemory.free(handleCell.memory) }
    }

    /// Retains the owner in `handle.data` and lists it with the loop; call right after `uv_<type>_init`.
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

/// The loop's list of open handles, linked through the first `linksSize` bytes of each handle's
/// memory, so it takes any owner type without a field in the owner.
/// Thread rule: confined to its loop's thread.
struct OpenHandleList {
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

/// An object that owns a handle and nothing more of it: listeners, a signal's handle, the inotify hub, a child process.
/// Thread rule: loop thread only, except `init` and `loop`.
class LoopHandle: LoopHandleOwner {
    final let handleCell: LoopHandleCell
    // Last, so a subclass's one-byte fields fill the word it starts.
    @exclusivity(unchecked) final var handleState = LoopHandleState.unopened

    init(loop: EventLoop, byteCount: Int) {
        handleCell = LoopHandleCell(loop: loop, byteCount: byteCount)
    }

    deinit { ownerWillDie() }

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
    /// What opened it, when ReactiveUV did; nil for handles other code opened.
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

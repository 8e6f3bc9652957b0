internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Owns the memory of one libuv handle and keeps itself alive while libuv may touch it.
///
/// The life of a handle:
/// 1. `init` allocates `uv_handle_size(type)` bytes (on any thread).
/// 2. On the loop thread the subclass calls `uv_<type>_init`, then `didOpen()`,
///    which stores `Unmanaged.passRetained(self)` in `handle.data` and links the
///    handle into the loop's list of open handles.
/// 3. `closeHandle()` calls `uv_close`; libuv calls back later and only then is the
///    memory freed, the retain released, and `didClose()` called.
///
/// `deinit` asserts the handle was closed (or never opened): an object that
/// dies while libuv still points into its memory is a bug we want to see.
///
/// Public only because the public connections (`StreamConnection` and its subclasses) are its
/// subclasses: it is the runtime's base for objects that own a libuv handle, and has no public
/// members for users beyond `loop`, and no public initializer.
///
/// Thread rule: loop thread only, except `init` and `loop` (safe from any thread).
public class LoopHandle {
    // Everything below is confined to `loop`'s thread once `didOpen()` ran.
    private enum State { case unopened, open, closing, closed }

    /// The loop this handle's libuv handle lives on (kept alive by the handle): for a connection,
    /// the loop its socket lives on.
    ///
    /// Thread rule: safe from any thread (immutable).
    public let loop: EventLoop
    /// The handle memory; freed in the close callback.
    let raw: UnsafeMutableRawPointer
    /// This handle's place in the loop's list of open handles (`loop.openHandleList`).
    @exclusivity(unchecked) final var listLinks = IntrusiveLinks<LoopHandle>()
    // Last, so a subclass's one-byte fields fill the word it starts (declaration order is layout order).
    @exclusivity(unchecked) private var state = State.unopened

    /// Allocates memory for a handle of `type`.
    init(loop: EventLoop, byteCount: Int) {
        self.loop = loop
        self.raw = LibUVMemory.allocate(byteCount)
    }

    /// `loop` as `EventLoop.inEventLoop` compares it (the handle keeps the loop alive).
    ///
    /// Computed, not stored: eight bytes fewer in every handle (an idle server holds one per client).
    ///
    /// Thread rule: safe from any thread.
    final var loopIdentity: UnsafeMutableRawPointer { Unmanaged.passUnretained(loop).toOpaque() }

    /// `loop.inEventLoop`, without retaining the loop around the thread-local lookup.
    ///
    /// Thread rule: safe from any thread.
    final var onLoopThread: Bool {
        ThreadLocals.currentLoop.value == loopIdentity
    }

    deinit {
        assert(state == .closed || state == .unopened,
               "a \(kind) handle was released while libuv still owned it (state \(state)): it must be closed first")
        if state == .unopened { LibUVMemory.free(raw) }
    }

    /// The handle as libuv's base type.
    final var handle: UnsafeMutablePointer<uv_handle_t> {
        raw.assumingMemoryBound(to: uv_handle_t.self)
    }

    /// The handle as a concrete libuv type.
    final func pointer<T>(as type: T.Type) -> UnsafeMutablePointer<T> {
        raw.assumingMemoryBound(to: T.self)
    }

    /// libuv's name for this handle's type ("timer", "tcp"), once opened.
    final var kind: String {
        guard state != .unopened else { return "unopened" }
        return String(cString: uv_handle_type_name(handle.pointee.type))
    }

    /// What created this handle, for leak reports ("timer from schedule(after: 3600s)").
    var label: String { kind }

    /// Whether the handle is open (initialized and not yet closing).
    final var isHandleOpen: Bool { state == .open }

    /// Marks the handle initialized: retains self in `handle.data` and registers it with the loop.
    ///
    /// Call right after `uv_<type>_init` succeeded.
    final func didOpen() {
        assertInEventLoop()
        assert(state == .unopened, "didOpen() called twice")
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        state = .open
        loop.openHandleList.insert(self)
    }

    /// Starts closing the handle; the memory is freed when libuv calls back. Idempotent.
    final func closeHandle() {
        assertInEventLoop()
        guard state == .open else { return }
        state = .closing
        loop.openHandleList.remove(self)
        willClose()
        uv_close(handle, loopHandleCloseCallback)
    }

    /// Called once, just before `uv_close`: stop whatever the handle was doing.
    func willClose() {}

    /// Called by the loop's shutdown for a handle still open: by default just `closeHandle()`.
    ///
    /// Handles behind a signal override it to tell their subscriber the loop
    /// went away (an error) before closing. It must leave the handle closed.
    func closeForShutdown() { closeHandle() }

    /// Called once, after libuv released the handle: drop callbacks and captured state.
    func didClose() {}

    /// The close callback's entry point.
    fileprivate final func finishClose() {
        state = .closed
        LibUVMemory.free(raw)
        didClose()
    }
}

/// The one close callback for every handle ReactiveUV opens.
private let loopHandleCloseCallback: uv_close_cb = { handle in
    guard let handle, let data = handle.pointee.data else { return }
    // Balances the passRetained in didOpen(): after this the handle may die.
    let owner = Unmanaged<LoopHandle>.fromOpaque(data).takeRetainedValue()
    owner.finishClose()
}

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

/// The loop's list of open handles (`EventLoop.openHandleList`), through `LoopHandle.listLinks`.
enum LoopHandleList: IntrusiveListMembership {
    static func withLinks<Result>(of element: LoopHandle, _ body: (inout IntrusiveLinks<LoopHandle>) -> Result) -> Result {
        body(&element.listLinks)
    }
}

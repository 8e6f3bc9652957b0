import CLibUV
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// The loop's list of open handles is linked through each handle's memory, whatever owns the
/// handle (a `LoopHandle`, or a connection that stores its handle): handles closed from the
/// list's back, middle and front leave the others listed, and shutdown reaches every owner left.
final class OpenHandleListTests: XCTestCase {
    func testHandlesClosedAnywhereInTheListLeaveTheOthersAndShutdownClosesEachOwnerLeft() throws {
        let loop = EventLoop(name: "handle-list")
        let toldOfShutdown = Locked<[String]>([])
        let handles = (0..<5).map { NamedIdleHandle(loop: loop, name: "idle \($0)", toldOfShutdown: toldOfShutdown) }
        let stream = StreamConnection(loop: loop, transport: .pipe, limits: StreamBufferLimits(), origin: "from the test")
        let opened = onLoop(loop) { () -> Bool in
            for handle in handles[0..<3] { handle.open() }
            guard (try? stream.open()) != nil else { return false }
            for handle in handles[3...] { handle.open() }
            return true
        }
        XCTAssertEqual(opened, true, "the pipe handle did not open")
        // The first opened is the list's back, the last its front.
        _ = onLoop(loop) { for index in [0, 2, 4] { handles[index].closeHandle() } }
        XCTAssertEqual(Set(try loop.openHandles().compactMap(\.label)), ["idle 1", "idle 3", stream.label])

        let report = try loop.tryShutdown()
        XCTAssertEqual(report.loopCloseResult, 0)
        XCTAssertEqual(Set(report.closedHandles.compactMap(\.label)), ["idle 1", "idle 3", stream.label])
        XCTAssertEqual(Set(toldOfShutdown.current), ["idle 1", "idle 3"])
        XCTAssertFalse(stream.isOpen)
        guard case .shutDown? = stream.endReason else {
            return XCTFail("the connection was not ended by the shutdown: \(String(describing: stream.endReason))")
        }
    }
}

/// An idle handle with a name, noting when shutdown closes it.
private final class NamedIdleHandle: LoopHandle, @unchecked Sendable {
    // `name` is immutable; the handle is touched on the loop thread only; the list is locked.
    private let name: String
    private let toldOfShutdown: Locked<[String]>

    init(loop: EventLoop, name: String, toldOfShutdown: Locked<[String]>) {
        self.name = name
        self.toldOfShutdown = toldOfShutdown
        super.init(loop: loop, byteCount: Int(uv_handle_size(UV_IDLE)))
    }

    override var label: String { name }

    func open() {
        guard uv_idle_init(loop.uvLoop, pointer(as: uv_idle_t.self)) == 0 else { return }
        didOpen()
    }

    override func closeForShutdown() {
        toldOfShutdown.withLock { $0.append(name) }
        closeHandle()
    }
}

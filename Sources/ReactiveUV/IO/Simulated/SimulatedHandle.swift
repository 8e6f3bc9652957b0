internal import CLibUV

/// A simulated handle has handle memory and a place in the loop's list, like a libuv handle, so the
/// leak check and shutdown see it; no libuv call ever touches it.
extension LoopHandleOwner {
    /// `didOpen()` for a handle no libuv call initialized (a simulated one): its type is written
    /// for the leak report, then it is listed with the loop.
    func didOpenSimulated(as type: uv_handle_type) {
        handle.pointee.type = type
        didOpen()
    }

    /// `closeHandle()` for a handle `didOpenSimulated` opened: unlisted now, its close callback run
    /// as a callback of the loop, as libuv's would be. False when it was not open. Loop thread only.
    @discardableResult
    func closeSimulatedHandle() -> Bool {
        assertInEventLoop()
        guard handleState == .open else { return false }
        handleState = .closing
        loop.openHandleList.remove(handleCell.memory)
        willClose()
        // libuv's close callback for this type, called as libuv would call it.
        let closed = UncheckedSendable((Self.closeCallback, handle))
        loop.execute { closed.value.0(closed.value.1) }
        return true
    }
}

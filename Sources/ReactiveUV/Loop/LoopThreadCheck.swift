// Debug-only checks that loop-thread-only entry points run on their loop's thread: a call from
// another thread would corrupt libuv silently, later. Release builds compile them out.

extension EventLoop {
    /// Traps unless called on this loop's thread, or any thread once it shut down (debug builds only);
    /// the message names `operation` (the calling function by default), `file` and `line`.
    /// Thread rule: safe from any thread (it is the check).
    @inline(__always)
    func assertInEventLoop(_ operation: @autoclosure () -> String = #function,
                           file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if !inEventLoop { loopThreadViolationTrap(operation(), file: file, line: line) }
        #endif
    }

    /// The message `assertInEventLoop` traps with here, or nil when allowed (this loop's thread,
    /// or any once it closed). It names the operation, the loop and the calling thread.
    /// Thread rule: safe from any thread.
    func loopThreadViolation(_ operation: String) -> String? {
        if inEventLoop || isShutDown { return nil }
        let caller = EventLoop.current.map { "the thread of loop '\($0.name)'" } ?? "a thread that is no loop's"
        return "\(operation) is loop thread only: it must run on loop '\(name)''s thread, but was called on \(caller) (hop there with execute or enqueue first)"
    }

    /// Out of line, so a passing check stays small.
    @inline(never)
    private func loopThreadViolationTrap(_ operation: String, file: StaticString, line: UInt) {
        guard let message = loopThreadViolation(operation) else { return }
        preconditionFailure(message, file: file, line: line)
    }
}

extension LoopHandleOwner {
    /// `loop.assertInEventLoop` naming this handle ("tcp connection with 127.0.0.1:80 ...: close()").
    /// Thread rule: safe from any thread (it is the check).
    @inline(__always)
    func assertInEventLoop(_ operation: @autoclosure () -> String = #function,
                                 file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if !onLoopThread { loop.assertInEventLoop("\(label): \(operation())", file: file, line: line) }
        #endif
    }
}

extension LoopRequest {
    /// `loop.assertInEventLoop` naming this request ("getaddrinfo example.com: willStart(handingOver:)").
    /// Thread rule: safe from any thread (it is the check).
    @inline(__always)
    final func assertInEventLoop(_ operation: @autoclosure () -> String = #function,
                                 file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if !loop.inEventLoop { loop.assertInEventLoop("\(label): \(operation())", file: file, line: line) }
        #endif
    }
}

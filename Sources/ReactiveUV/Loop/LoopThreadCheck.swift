// Debug-only checks that loop-thread-only entry points run on their loop's thread
// (SwiftNIO's `assertInEventLoop`). libuv is not thread-safe: a handle opened,
// closed or written from another thread corrupts the loop without a word, much
// later. In debug builds these checks trap at the call instead, naming the loop,
// the thread and the operation; release builds compile them out (`#if DEBUG`),
// so the hot paths (a TCP write, a read, a timer) pay nothing.

extension EventLoop {
    /// Debug builds: traps unless called on this loop's thread. Release builds: nothing.
    ///
    /// Call it first in every entry point that is loop thread only.
    ///
    /// - Parameters:
    ///   - operation: What was called ("StreamConnection.send"), for the message; the calling function by default.
    ///   - file: The caller's file, for the trap.
    ///   - line: The caller's line, for the trap.
    ///
    /// Thread rule: safe from any thread (it is the check).
    @inline(__always)
    func assertInEventLoop(_ operation: @autoclosure () -> String = #function,
                           file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if !inEventLoop { loopThreadViolationTrap(operation(), file: file, line: line) }
        #endif
    }

    /// The message `assertInEventLoop` traps with when called here now, or nil when the call is allowed.
    ///
    /// Allowed on this loop's thread, and on any thread once the loop has closed (its thread
    /// has ended and nothing runs on it any more: teardown and clean-up then run on the
    /// caller's thread). The message names the operation, this loop and the calling thread
    /// (another loop's, or none), so a report says at once which hop was missing.
    ///
    /// Thread rule: safe from any thread.
    func loopThreadViolation(_ operation: String) -> String? {
        if inEventLoop || isShutDown { return nil }
        let caller = EventLoop.current.map { "the thread of loop '\($0.name)'" } ?? "a thread that is no loop's"
        return "\(operation) is loop thread only: it must run on loop '\(name)''s thread, but was called on \(caller) (hop there with execute or enqueue first)"
    }

    /// Out of line, so a passing check is one thread-local load and a compare.
    @inline(never)
    private func loopThreadViolationTrap(_ operation: String, file: StaticString, line: UInt) {
        guard let message = loopThreadViolation(operation) else { return }
        preconditionFailure(message, file: file, line: line)
    }
}

extension LoopHandleOwner {
    /// `loop.assertInEventLoop` naming this handle ("tcp connection with 127.0.0.1:80 ...: close()").
    ///
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
    ///
    /// Thread rule: safe from any thread (it is the check).
    @inline(__always)
    final func assertInEventLoop(_ operation: @autoclosure () -> String = #function,
                                 file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if !loop.inEventLoop { loop.assertInEventLoop("\(label): \(operation())", file: file, line: line) }
        #endif
    }
}

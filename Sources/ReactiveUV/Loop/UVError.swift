internal import CLibUV

/// An error reported by libuv, with its symbolic name and human message.
///
/// Match on the code with the named values, as swift-system's `Errno`:
///
/// ```swift
/// do { try something() }
/// catch UVError.connectionRefused { retryLater() }
/// catch UVError.nameNotFound { print("no such host") }
/// ```
///
/// Equality and hashing compare `code` only, so an error with a `context` or a message of our
/// own equals the named value with its code.
///
/// Thread rule: a value type; safe from any thread.
public struct UVError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The negative libuv error code, for example `UV_ENOENT` (-2).
    public let code: Int32
    /// The symbolic name from libuv, for example `"ENOENT"`; `"Unknown system error -123456"` for a code libuv does not know.
    public let name: String
    /// The human-readable message, libuv's (`"no such file or directory"`) or our own.
    public let message: String
    /// What was being attempted, for example `"uv_tcp_bind(127.0.0.1:80)"`; empty when unknown.
    public let context: String

    /// Creates an error for a negative libuv `code` (`UV_EADDRINUSE`), with libuv's `name` and
    /// `message`; `context` says what was being attempted.
    ///
    /// Thread rule: safe from any thread.
    public init(code: Int32, context: String = "") {
        self.code = code
        self.name = UVError.libuvName(for: code)
        self.message = UVError.libuvMessage(for: code)
        self.context = context
    }

    /// Creates an error for a libuv error code with a message of our own (an argument rejected
    /// before libuv sees it: "interval must be positive").
    ///
    /// Thread rule: safe from any thread.
    public init(code: Int32, message: String, context: String = "") {
        self.code = code
        self.name = UVError.libuvName(for: code)
        self.message = message
        self.context = context
    }

    /// `"ENOENT: no such file or directory (uv_fs_event_start /tmp/x)"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        context.isEmpty ? "\(name): \(message)" : "\(name): \(message) (\(context))"
    }

    /// Whether two errors have the same code (context and message aside).
    ///
    /// Thread rule: safe from any thread.
    public static func == (lhs: UVError, rhs: UVError) -> Bool {
        lhs.code == rhs.code
    }

    /// Hashes the code only, so that equal errors hash alike.
    ///
    /// Thread rule: safe from any thread.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    /// Whether `value` is a `UVError` with `pattern`'s code, so `catch UVError.connectionRefused`
    /// and `case UVError.addressInUse:` match any error.
    ///
    /// Thread rule: safe from any thread.
    public static func ~= (pattern: UVError, value: any Error) -> Bool {
        guard let error = value as? UVError else { return false }
        return error.code == pattern.code
    }

    /// libuv's name for `code`, into a stack buffer: `uv_err_name` leaks for an unknown code.
    static func libuvName(for code: Int32) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: messageBufferSize) { buffer in
            String(cString: uv_err_name_r(code, buffer.baseAddress, buffer.count))
        }
    }

    /// libuv's message for `code`, into a stack buffer: `uv_strerror` leaks for an unknown code.
    static func libuvMessage(for code: Int32) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: messageBufferSize) { buffer in
            String(cString: uv_strerror_r(code, buffer.baseAddress, buffer.count))
        }
    }

    /// Longer than libuv's longest message and "Unknown system error -2147483648"; libuv truncates beyond.
    private static let messageBufferSize = 128

    /// `UV_EINVAL`: an invalid argument. The same as `UVError.invalidArgument.code`.
    public static let invalidArgumentCode: Int32 = UV_EINVAL.rawValue
    /// `UV_ECANCELED`: the operation was cancelled. The same as `UVError.cancelled.code`.
    public static let cancelledCode: Int32 = UV_ECANCELED.rawValue
    /// `UV_ENOENT`: no such file or directory. The same as `UVError.noSuchFile.code`.
    public static let noSuchFileCode: Int32 = UV_ENOENT.rawValue
    /// `UV_EACCES`: permission denied. The same as `UVError.permissionDenied.code`.
    public static let permissionDeniedCode: Int32 = UV_EACCES.rawValue
    /// `UV_EADDRINUSE`: address already in use. The same as `UVError.addressInUse.code`.
    public static let addressInUseCode: Int32 = UV_EADDRINUSE.rawValue
    /// `UV_ECONNREFUSED`: connection refused. The same as `UVError.connectionRefused.code`.
    public static let connectionRefusedCode: Int32 = UV_ECONNREFUSED.rawValue
    /// `UV_ETIMEDOUT`: timed out (a server's `TCPOptions.idleTimeout` closed the connection, for one).
    public static let timedOutCode: Int32 = UV_ETIMEDOUT.rawValue
}

/// Throws a `UVError` for a negative libuv result; the one place every libuv result goes through.
@discardableResult
func uvCheck(_ result: Int32, _ context: @autoclosure () -> String) throws(UVError) -> Int32 {
    if result < 0 { throw UVError(code: result, context: context()) }
    return result
}

/// Checks a libuv result where no caller can receive an error (a callback, or a call that fails
/// only on a programming error): a failure goes to standard error, never dropped.
@discardableResult
func uvCheckReporting(_ result: Int32, _ context: @autoclosure () -> String) -> Bool {
    do {
        try uvCheck(result, context())
        return true
    } catch {
        reportMisuse("libuv call failed: \(error)")
        return false
    }
}

/// The continuation the async bridges suspend a task on. Each bridge resumes it exactly once,
/// taking it out of its state under its lock first, so release builds use an unsafe one (no
/// checker per wait). Debug builds, where tests and sanitizers run, use a checked one: misuse
/// traps, and the thread sanitizer sees its synchronization (an unsafe continuation's ordering
/// lives in the uninstrumented runtime, which it reports as a race).
#if DEBUG
typealias BridgeContinuation<T> = CheckedContinuation<T, any Error>
#else
typealias BridgeContinuation<T> = UnsafeContinuation<T, any Error>
#endif

/// Suspends the task on a `BridgeContinuation` that `body` hands to whoever will resume it.
@inline(__always)
func withBridgeContinuation<T>(
    isolation: isolated (any Actor)? = #isolation, _ body: (BridgeContinuation<T>) -> Void
) async throws -> sending T {
    #if DEBUG
    try await withCheckedThrowingContinuation(isolation: isolation, body)
    #else
    try await withUnsafeThrowingContinuation(isolation: isolation, body)
    #endif
}

/// The continuation the async bridges (`values`, `first()`/`last()`/`collect()`) suspend a task on.
///
/// Each bridge resumes its continuation exactly once: whoever resumes it takes it out of the
/// bridge's state under the bridge's lock first. So release builds use an unsafe continuation: a
/// checked one allocates its checker for every wait. Debug builds, where the tests and the sanitizers run, use a checked one:
/// a misuse traps there, and the thread sanitizer sees its synchronization. An unsafe continuation
/// resumed from another thread before its task reached the await is ordered by an atomic inside
/// the (uninstrumented) concurrency runtime, which the sanitizer cannot see: it reported the
/// task's next write to its frame as a race with the resumer's read.
#if DEBUG
typealias BridgeContinuation<T> = CheckedContinuation<T, any Error>
#else
typealias BridgeContinuation<T> = UnsafeContinuation<T, any Error>
#endif

/// Suspends the task on a `BridgeContinuation` that `body` hands to whoever will resume it.
///
/// - Parameters:
///   - isolation: Where the task waits (the caller's isolation).
///   - body: Called at once with the continuation.
/// - Returns: What the continuation was resumed with.
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

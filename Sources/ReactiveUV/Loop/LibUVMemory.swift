#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Memory for one libuv handle or request (`LoopHandle`, `LoopRequest`).
///
/// Straight from `malloc`, which aligns to 16 bytes on the 64-bit Linux platforms we build for
/// (glibc's and musl's `MALLOC_ALIGNMENT`; libuv's own allocations rely on it too), where
/// `UnsafeMutableRawPointer.allocate(byteCount:alignment:)` would take the slower `posix_memalign`.
///
/// Thread rule: safe from any thread.
enum LibUVMemory {
    /// `byteCount` bytes, 16-byte aligned; freed with `free(_:)`.
    static func allocate(_ byteCount: Int) -> UnsafeMutableRawPointer {
        if let memory = malloc(byteCount) { return memory }
        // Out of memory: Swift's allocator ends the process as every other allocation would
        // (its memory, should it succeed, is malloc's on Linux, so `free` takes it too).
        return UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 16)
    }

    /// Frees memory from `allocate(_:)`.
    static func free(_ memory: UnsafeMutableRawPointer) {
        #if canImport(Glibc)
        Glibc.free(memory)
        #else
        Musl.free(memory)
        #endif
    }
}

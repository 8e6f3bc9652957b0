#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Memory for one libuv handle or request: `malloc`, 16-byte aligned on our 64-bit Linux
/// targets (glibc's and musl's), without `posix_memalign`.
/// Thread rule: safe from any thread.
enum LibUVMemory {
    /// `byteCount` bytes, 16-byte aligned; freed with `free(_:)`.
    static func allocate(_ byteCount: Int) -> UnsafeMutableRawPointer {
        if let memory = malloc(byteCount) { return memory }
        // Out of memory: Swift's allocator ends the process as any allocation would (its memory is
        // malloc's on Linux, so `free` takes it too).
        return UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 16)
    }

    static func free(_ memory: UnsafeMutableRawPointer) {
        #if canImport(Glibc)
        Glibc.free(memory)
        #else
        Musl.free(memory)
        #endif
    }
}

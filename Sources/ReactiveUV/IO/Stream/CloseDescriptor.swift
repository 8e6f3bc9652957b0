#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Closes a descriptor ReactiveUV owns; EINTR is not retried (Linux closes the descriptor anyway).
func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

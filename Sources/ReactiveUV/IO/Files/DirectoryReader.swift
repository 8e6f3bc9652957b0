internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads directories through descriptors the caller holds (`getdents64`), for the walks that must stay inside a
/// tree (`Files.removeTree`, the recursive watch). Thread rule: one thread at a time (it owns one buffer).
final class DirectoryReader {
    /// One entry as read: its name's bytes (no NUL) and what the directory entry says it is.
    typealias Entry = (name: [CChar], type: FileType)

    private static let bufferSize = 32 * 1024
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: DirectoryReader.bufferSize, alignment: 8)

    deinit { buffer.deallocate() }

    /// Opens the directory `name` in `parent` (or `AT_FDCWD`) never through a link: the descriptor, or `-errno`.
    static func openDirectory(_ name: UnsafePointer<CChar>, in parent: Int32) -> Int32 {
        let descriptor = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        return descriptor >= 0 ? descriptor : -errno
    }

    /// Every entry but `.` and `..` of `descriptor` from its position; throws the negative `errno` of a failed read.
    func entries(of descriptor: Int32) throws(ErrorNumber) -> [Entry] {
        var entries: [Entry] = []
        while true {
            let count = getdents64(descriptor, buffer, Self.bufferSize)
            if count == 0 { return entries }
            guard count > 0 else { throw ErrorNumber(code: -errno) }
            // struct linux_dirent64: u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, then the NUL-terminated name.
            var offset = 0
            while offset < count {
                let length = Int(buffer.loadUnaligned(fromByteOffset: offset + 16, as: UInt16.self))
                let type = buffer.load(fromByteOffset: offset + 18, as: UInt8.self)
                let name = (buffer + offset + 19).assumingMemoryBound(to: CChar.self)
                let nameLength = strnlen(name, length - 19)
                offset += length
                if nameLength == 1 && name[0] == 0x2E || nameLength == 2 && name[0] == 0x2E && name[1] == 0x2E { continue }
                entries.append((Array(UnsafeBufferPointer(start: name, count: nameLength)), FileType(direntType: type)))
            }
        }
    }

    /// A failed call's negative `errno`, thrown where the caller names the path.
    struct ErrorNumber: Error {
        let code: Int32
    }
}

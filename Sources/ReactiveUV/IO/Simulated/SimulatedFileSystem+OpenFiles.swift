internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One open file description of the simulated tree (`Files.open` on a simulated loop): the node it
/// holds, which stays readable after the name is renamed over or unlinked, and what the open allows.
///
/// Thread rule: the simulation's driving thread only (its loops' callbacks run there).
final class OpenDescription {
    let node: SimulatedFileSystem.Node
    /// The path it was opened at (faults are armed on paths).
    let path: String
    let readable: Bool
    let writable: Bool
    /// `O_APPEND`: every write lands at the end, whatever its offset (as Linux's `pwrite` does).
    let appends: Bool

    init(node: SimulatedFileSystem.Node, path: String, readable: Bool, writable: Bool, appends: Bool) {
        self.node = node
        self.path = path
        self.readable = readable
        self.writable = writable
        self.appends = appends
    }
}

/// The calls of an `OpenFile` on the in-memory tree, with the errors Linux gives. Descriptors are
/// negative (-2, -3...), lowest free first, so one passed by mistake to a real call fails with `EBADF`.
extension SimulatedFileSystem {
    /// `open(2)` with `flags` (`O_RDONLY`/`O_WRONLY`/`O_RDWR`, `O_CREAT`, `O_TRUNC`, `O_APPEND`, `O_EXCL`):
    /// an armed `EMFILE` first, then `ENOENT`, `EEXIST`, `EISDIR` (a directory opened to write),
    /// `EACCES`; a directory opens for reading (its reads fail with `EISDIR`).
    func open(_ path: String, flags: Int32, permissions: UInt32, context: String) throws(UVError) -> Int32 {
        // The kernel takes a descriptor before it looks at the path.
        try strike(.tooManyOpenFiles, path, context: context)
        let access = flags & O_ACCMODE
        let writes = access != O_RDONLY
        let exclusive = flags & O_CREAT != 0 && flags & O_EXCL != 0
        // O_EXCL does not follow a link at the last name: any entry there is EEXIST.
        let (parent, name, found) = try locate(path, followLast: !exclusive, context: context)
        let node: Node
        if let found {
            if exclusive { throw Self.error(UV_EEXIST, context) }
            if case .directory = found.content, writes || flags & O_CREAT != 0 { throw Self.error(UV_EISDIR, context) }
            try require(access == O_RDWR ? 6 : writes ? 2 : 4, of: found, context)
            node = found
            if flags & O_TRUNC != 0, writes, case .file(let bytes) = node.content, !bytes.isEmpty {
                node.content = .file([])
                node.modified = now
                node.changed = now
                touched(node)
            }
        } else {
            guard flags & O_CREAT != 0 else { throw Self.error(UV_ENOENT, context) }
            guard !name.isEmpty else { throw Self.error(UV_EISDIR, context) }
            try require(3, of: parent, context)
            node = makeNode(.file([]), permissions: permissions & 0o7777 & ~0o022)
            setEntry(name, in: parent, to: node)
        }
        var descriptor: Int32 = -2
        while descriptors[descriptor] != nil { descriptor -= 1 }
        descriptors[descriptor] = OpenDescription(node: node, path: Self.normalized(path), readable: access != O_WRONLY,
                                                  writable: writes, appends: flags & O_APPEND != 0)
        return descriptor
    }

    /// `mkstemp(3)`: the six X's that end `template` replaced until the name is free (by a count, so runs agree),
    /// the file made with mode 0600 and opened for reading and writing. Returns the descriptor and the name.
    func makeTemporaryFile(_ template: String, context: String) throws(UVError) -> (Int32, String) {
        guard template.hasSuffix("XXXXXX") else { throw Self.error(UV_EINVAL, context) }
        let stem = String(template.dropLast(6))
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        while true {
            temporaryCount += 1
            var count = temporaryCount
            var suffix = ""
            for _ in 0..<6 {
                suffix.append(alphabet[count % alphabet.count])
                count /= alphabet.count
            }
            let path = stem + suffix
            do throws(UVError) {
                return (try open(path, flags: O_RDWR | O_CREAT | O_EXCL, permissions: 0o600, context: context), path)
            } catch where error.code == UV_EEXIST.rawValue {
                continue
            }
        }
    }

    /// `pread(2)`: up to `count` bytes at `offset`, fewer at the end, none past it; `EBADF` for a file
    /// opened to write only, `EISDIR` for a directory, an armed `EIO`.
    func read(_ descriptor: Int32, at offset: Int, count: Int, context: String) throws(UVError) -> [UInt8] {
        let open = try description(descriptor, context)
        guard open.readable else { throw OpenFile.accessModeError(writeOnly: true, "read", context: context) }
        guard case .file(let bytes) = open.node.content else { throw Self.error(UV_EISDIR, context) }
        try strike(.readError, open.path, context: context)
        open.node.accessed = now
        let read = offset < bytes.count ? Array(bytes[offset..<min(bytes.count, offset + count)]) : []
        read.withUnsafeBytes { readObserver?($0, Int32(clamping: read.count)) }
        return read
    }

    /// `pwrite(2)` of all of `bytes` at `offset` (nil: at the end, an append), the gap past the end read
    /// as zeros; `EBADF` for a file opened to read only, an armed `ENOSPC` (nothing written). Returns the count.
    func write(_ bytes: [UInt8], to descriptor: Int32, at offset: Int?, context: String) throws(UVError) -> Int {
        let open = try description(descriptor, context)
        guard open.writable else {
            throw OpenFile.accessModeError(writeOnly: false, offset == nil ? "append" : "write", context: context)
        }
        guard case .file(var contents) = open.node.content else { throw Self.error(UV_EISDIR, context) }
        try strike(.noSpace, open.path, context: context)
        // Moved out, so the array is changed in place rather than copied.
        open.node.content = .file([])
        let start = open.appends ? contents.count : offset ?? contents.count
        if start > contents.count { contents += repeatElement(0, count: start - contents.count) }
        let overlap = min(bytes.count, contents.count - start)
        contents.replaceSubrange(start..<start + overlap, with: bytes)
        open.node.content = .file(contents)
        open.node.modified = now
        open.node.changed = now
        touched(open.node)
        return bytes.count
    }

    /// `fstat(2)`.
    func stat(_ descriptor: Int32, context: String) throws(UVError) -> FileInfo {
        info(of: try description(descriptor, context).node)
    }

    /// `ftruncate(2)`: cut, or extended with zeros; `EBADF` for a file opened to read only.
    func truncate(_ descriptor: Int32, to size: Int, context: String) throws(UVError) {
        let open = try description(descriptor, context)
        guard open.writable else { throw OpenFile.accessModeError(writeOnly: false, "truncate", context: context) }
        guard case .file(var contents) = open.node.content else { throw Self.error(UV_EISDIR, context) }
        open.node.content = .file([])
        if size < contents.count {
            contents.removeSubrange(size...)
        } else {
            contents += repeatElement(0, count: size - contents.count)
        }
        open.node.content = .file(contents)
        open.node.modified = now
        open.node.changed = now
        touched(open.node)
    }

    /// `fsync(2)` / `fdatasync(2)`: nothing to flush; `EBADF` for a descriptor not open.
    func sync(_ descriptor: Int32, context: String) throws(UVError) {
        _ = try description(descriptor, context)
    }

    /// `close(2)`: `EBADF` for a descriptor not open.
    func close(_ descriptor: Int32, context: String) throws(UVError) {
        guard descriptors.removeValue(forKey: descriptor) != nil else { throw Self.error(UV_EBADF, context) }
    }

    /// How many descriptors are open (a test's leak check).
    package var openDescriptorCount: Int { descriptors.count }

    private func description(_ descriptor: Int32, _ context: String) throws(UVError) -> OpenDescription {
        guard let open = descriptors[descriptor] else { throw Self.error(UV_EBADF, context) }
        return open
    }
}

internal import CLibUV

/// The calls of the `Files` family on the in-memory tree, each with the result a Linux file system
/// gives; `context` ("mkdir /a") names the call in errors.
extension SimulatedFileSystem {
    /// `stat` (`followLinks`) or `lstat`.
    func stat(_ path: String, followLinks: Bool, context: String) throws(UVError) -> FileInfo {
        info(of: try existing(path, followLast: followLinks, context: context))
    }

    /// `access(2)`: the path exists and the owner bits allow `mode` (4 read, 2 write, 1 execute).
    func access(_ path: String, mode: Int32, context: String) throws(UVError) {
        let node = try existing(path, followLast: true, context: context)
        try require(UInt32(mode & 7), of: node, context)
    }

    /// `chmod(2)`, following links.
    func changeMode(_ path: String, to mode: UInt32, context: String) throws(UVError) {
        let node = try existing(path, followLast: true, context: context)
        node.permissions = mode & 0o7777
        node.changed = now
        touched(node)
    }

    /// `mkdir(2)`: `EEXIST` for any name taken (a dangling link too), `EACCES` without write permission on the parent.
    func makeDirectory(_ path: String, mode: UInt32, context: String) throws(UVError) {
        let (parent, name, node) = try locate(path, followLast: false, context: context)
        guard node == nil, !name.isEmpty else { throw Self.error(UV_EEXIST, context) }
        try require(3, of: parent, context)
        setEntry(name, in: parent, to: makeNode(.directory([:]), permissions: mode & 0o7777 & ~0o022))
    }

    /// `mkdir -p`: each missing level made; an existing directory (or link to one) is fine, anything else `ENOTDIR`/`EEXIST`.
    func makeDirectories(_ path: String, mode: UInt32, context: String) throws(UVError) {
        var prefix = ""
        for name in Self.components(path) {
            prefix += "/" + name
            if let node = try locate(prefix, followLast: true, context: context).node {
                guard case .directory = node.content else {
                    throw Self.error(prefix == Self.normalized(path) ? UV_EEXIST : UV_ENOTDIR, context)
                }
                continue
            }
            try makeDirectory(prefix, mode: mode, context: context)
        }
    }

    /// `unlink(2)`: `EISDIR` for a directory (Linux's answer), `ENOENT` for nothing.
    func unlink(_ path: String, context: String) throws(UVError) {
        let (parent, name, node) = try locate(path, followLast: false, context: context)
        guard let node else { throw Self.error(UV_ENOENT, context) }
        if case .directory = node.content { throw Self.error(UV_EISDIR, context) }
        try require(3, of: parent, context)
        setEntry(name, in: parent, to: nil)
    }

    /// `rmdir(2)`: `ENOTDIR` for a file or link, `ENOTEMPTY` for a directory with entries, `EBUSY` for `/`.
    func removeDirectory(_ path: String, context: String) throws(UVError) {
        let (parent, name, node) = try locate(path, followLast: false, context: context)
        guard let node else { throw Self.error(UV_ENOENT, context) }
        guard case .directory(let entries) = node.content else { throw Self.error(UV_ENOTDIR, context) }
        if name.isEmpty { throw Self.error(UV_EBUSY, context) }
        guard entries.isEmpty else { throw Self.error(UV_ENOTEMPTY, context) }
        try require(3, of: parent, context)
        setEntry(name, in: parent, to: nil)
    }

    /// `rm -r`: the path and all under it (links not followed); `ENOENT` for nothing.
    func removeTree(_ path: String, context: String) throws(UVError) {
        let (parent, name, node) = try locate(path, followLast: false, context: context)
        guard node != nil else { throw Self.error(UV_ENOENT, context) }
        if name.isEmpty { throw Self.error(UV_EBUSY, context) }
        try require(3, of: parent, context)
        if let node { unlinkContents(of: node) }
        setEntry(name, in: parent, to: nil)
    }

    /// Everything under a removed directory is unlinked first, deepest first as the real walk removes it: each
    /// directory's watchers hear each entry go; open files there read on, watches there end.
    private func unlinkContents(of directory: Node) {
        guard case .directory(let entries) = directory.content else { return }
        for (name, child) in entries.sorted(by: { $0.key < $1.key }) {
            unlinkContents(of: child)
            notify(directory, .renamed, name)
            child.parent = nil
            notify(child, .renamed, "")
        }
    }

    /// `rename(2)`: replaces a file, or an empty directory with a directory; `ENOTDIR`, `EISDIR`,
    /// `ENOTEMPTY` and `EINVAL` (a directory into itself) as Linux answers.
    func rename(_ source: String, to destination: String, context: String) throws(UVError) {
        let from = try locate(source, followLast: false, context: context)
        guard let moving = from.node else { throw Self.error(UV_ENOENT, context) }
        if from.name.isEmpty { throw Self.error(UV_EBUSY, context) }
        let normalizedSource = Self.normalized(source)
        if Self.normalized(destination).hasPrefix(normalizedSource + "/") { throw Self.error(UV_EINVAL, context) }
        let to = try locate(destination, followLast: false, context: context)
        if to.name.isEmpty { throw Self.error(UV_EBUSY, context) }
        if let replaced = to.node {
            if replaced === moving { return }
            switch (moving.content, replaced.content) {
            case (.directory, .directory(let entries)):
                guard entries.isEmpty else { throw Self.error(UV_ENOTEMPTY, context) }
            case (.directory, _): throw Self.error(UV_ENOTDIR, context)
            case (_, .directory): throw Self.error(UV_EISDIR, context)
            default: break
            }
        }
        try require(3, of: from.parent, context)
        try require(3, of: to.parent, context)
        // Within one directory its watchers hear one move; across two, each hears its side.
        let within = from.parent === to.parent
        if !within { notifyMove(from: from.parent, from.name, to: to.parent, to.name) }
        setEntry(from.name, in: from.parent, to: nil, quietly: within)
        setEntry(to.name, in: to.parent, to: moving, quietly: within)
        if within { notify(to.parent, .moved, to.name, oldName: from.name) }
        moving.changed = now
    }

    /// `symlink(2)`: a link at `path` holding `target` (not checked); `EEXIST` for a name taken.
    func symbolicLink(at path: String, target: String, context: String) throws(UVError) {
        let (parent, name, node) = try locate(path, followLast: false, context: context)
        guard node == nil, !name.isEmpty else { throw Self.error(UV_EEXIST, context) }
        try require(3, of: parent, context)
        setEntry(name, in: parent, to: makeNode(.link(target), permissions: 0o777))
    }

    /// `readlink(2)`: `EINVAL` for anything but a link.
    func readLink(_ path: String, context: String) throws(UVError) -> String {
        guard case .link(let target) = try existing(path, followLast: false, context: context).content else {
            throw Self.error(UV_EINVAL, context)
        }
        return target
    }

    /// A whole file's bytes: `EISDIR` for a directory, `EACCES` without read permission, `EFBIG` past `maxSize`;
    /// an armed `EMFILE` strikes at the open, `EIO` at the read.
    func read(_ path: String, maxSize: Int, context: String) throws(UVError) -> [UInt8] {
        let node = try existing(path, followLast: true, context: context)
        try require(4, of: node, context)
        try strike(.tooManyOpenFiles, path, context: context)
        guard case .file(let bytes) = node.content else { throw Self.error(UV_EISDIR, context) }
        try strike(.readError, path, context: context)
        guard bytes.count <= maxSize else { throw Self.error(UV_EFBIG, context) }
        node.accessed = now
        bytes.withUnsafeBytes { readObserver?($0, Int32(clamping: bytes.count)) }
        return bytes
    }

    /// Writes a whole file, made with `mode` (less the umask 022) when absent; `EISDIR`, `EACCES`; an armed
    /// `EMFILE` strikes at the open, `ENOSPC` at the write (the file is then made or emptied, as a real one is).
    func write(_ bytes: [UInt8], to path: String, append: Bool, mode: UInt32, context: String) throws(UVError) {
        let (parent, name, found) = try locate(path, followLast: true, context: context)
        try strike(.tooManyOpenFiles, path, context: context)
        let node: Node
        if let found {
            guard case .file(let old) = found.content else { throw Self.error(UV_EISDIR, context) }
            try require(2, of: found, context)
            if !append { found.content = .file([]) }
            node = found
            _ = old
        } else {
            guard !name.isEmpty else { throw Self.error(UV_EISDIR, context) }
            try require(3, of: parent, context)
            node = makeNode(.file([]), permissions: mode & ~0o022)
            setEntry(name, in: parent, to: node)
        }
        node.modified = now
        node.changed = now
        touched(node)
        try strike(.noSpace, path, context: context)
        guard case .file(var contents) = node.content else { return }
        node.content = .file([])
        contents += bytes
        node.content = .file(contents)
    }

    /// A directory's entries, by name (a real listing's order is the file system's: sorted here, so runs agree).
    func list(_ path: String, context: String) throws(UVError) -> [DirectoryEntry] {
        let node = try existing(path, followLast: true, context: context)
        guard case .directory(let entries) = node.content else { throw Self.error(UV_ENOTDIR, context) }
        try require(4, of: node, context)
        return entries.sorted { $0.key < $1.key }.map { DirectoryEntry(name: $0.key, type: $0.value.type) }
    }
}

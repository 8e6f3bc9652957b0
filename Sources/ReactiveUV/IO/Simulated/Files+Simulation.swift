/// What an open file's operation does on a simulated loop: the answer of the simulation's tree for the descriptor.
typealias SimulatedFileWork<Value> = @Sendable (SimulatedFileSystem, Int32) throws(UVError) -> Value

/// A longer file-system operation's bodies: `body` starts its first step; on a simulated loop
/// `simulated` runs instead (its answer from the in-memory tree), or, when nil, the first step is refused.
///
/// Thread rule: immutable; the closures run on the loop thread only.
final class FileSteps<Value>: @unchecked Sendable {
    // Sendable: immutable, and its closures run on the operation's loop thread only.
    let body: (FileOperation<Value>) -> Void
    let simulated: ((FileOperation<Value>) -> Void)?

    init(body: @escaping (FileOperation<Value>) -> Void, simulated: ((FileOperation<Value>) -> Void)?) {
        self.body = body
        self.simulated = simulated
    }
}

/// `Files.open` and `Files.makeTemporaryFile` on a simulated loop: the file comes from the in-memory tree.
extension Files {
    /// Opens `path` in the tree with `flags` and sends the file; one nobody wants any more is closed. Loop thread only.
    static func simulateOpen(_ operation: FileOperation<OpenFile>, _ path: String, flags: Int32, permissions: UInt32) {
        operation.simulateStep("open \(path)") { files throws(UVError) in
            try files.open(path, flags: flags, permissions: permissions, context: "open \(path)")
        } then: { descriptor in
            deliver(opened: (descriptor, path), by: operation) { opened in
                try? operation.loop.simulatedFiles?.close(opened.0, context: "close \(path)")
            }
        }
    }

    /// Makes a file from `template` in the tree and sends it; one nobody wants any more is closed and removed. Loop thread only.
    static func simulateMakeTemporaryFile(_ operation: FileOperation<OpenFile>, _ template: String) {
        operation.simulateStep("mkstemp \(template)") { files throws(UVError) in
            try files.makeTemporaryFile(template, context: "mkstemp \(template)")
        } then: { made in
            deliver(opened: made, by: operation) { made in
                try? operation.loop.simulatedFiles?.close(made.0, context: "close")
                try? operation.loop.simulatedFiles?.unlink(made.1, context: "unlink \(made.1)")
            }
        }
    }
}

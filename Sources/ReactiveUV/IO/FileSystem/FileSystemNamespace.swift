/// The file system as `async throws` functions: the same operations as `Files`' signals, awaited.
///
/// Placeholder declaration for the open-file branch; part 1 of issue 17 declares the real one
/// (this file is deleted when the two merge).
///
/// Thread rule: safe from any thread.
public enum FileSystem {}

import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Keeps the first example of docs/guides/files.md compiling (its lines must equal the body below) and runs it in the
/// test's own temporary directory, on a checked loop.
final class GuideFilesExampleTests: FileSystemTestCase {
    private static func filesTourExample(work: String) async throws -> (FileInfo, [DirectoryEntry], Signal<String>) {
        // GUIDE-FILES-TOUR-BEGIN
        // `work` is a directory of yours.
        let info = try await FileSystem.stat(work + "/a.bin")                            // FileInfo: type, size, mode, owner, inode, times (ns)
        try await FileSystem.createDirectory(work + "/build/out", withParents: true)      // mkdir -p
        try await FileSystem.copy(from: work + "/a.bin", to: work + "/build/out/a.bin")   // cloned where the file system can; EEXIST unless overwrite: true
        var built: [DirectoryEntry] = []
        for try await entry in FileSystem.list(work + "/build/out") { built.append(entry) }  // streamed, 1,024 per readdir
        try await FileSystem.removeTree(work + "/build")                                   // depth first; never follows a symbolic link

        let regularFiles = Files.list(work).filter { $0.type == .regular }.map(\.name)    // the signal form: it lists when subscribed
        // GUIDE-FILES-TOUR-END
        return (info, built, regularFiles)
    }

    func testTheFilesTourExampleIsThisCodeAndWorks() throws {
        try assertDocumentBlock("docs/guides/files.md", containing: "FileSystem.stat(work + \"/a.bin\")", matches: "GUIDE-FILES-TOUR")
        let bytes = bytePattern(100_000, seed: 17)
        let source = try makeFile("a.bin", bytes)
        let work = directory
        try checked { harness in
            // Run as a task on the harness's loop (the recorder's home), so the loop checks what the example leaves.
            let example = try harness.record(Signal.async { try await Self.filesTourExample(work: work) })
            let (info, built, regularFiles) = try XCTUnwrap(try example.waitForValues(1).first)
            XCTAssertTrue(try example.waitForTermination().isCompleted)
            XCTAssertEqual(info.type, .regular)
            XCTAssertEqual(info.size, UInt64(bytes.count))
            XCTAssertEqual(info.inode, UInt64(try systemStat(source).st_ino))
            XCTAssertEqual(built, [DirectoryEntry(name: "a.bin", type: .regular)], "the copy was listed")
            XCTAssertThrowsError(try systemStat(work + "/build"), "removeTree removed the build directory")
            XCTAssertEqual(try completes(harness, regularFiles), ["a.bin"])
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: source)), Data(bytes), "the source is as it was")
    }
}

import Foundation
import XCTest

/// Only Loop/ and IO/ may speak to libuv; the layers above are plain Swift (testable on virtual time).
final class LayeringTests: XCTestCase {
    func testOnlyLoopAndIOImportCLibUV() throws {
        let sources = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        XCTAssertGreaterThan(files.count, 20)
        var offenders: [String] = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            let importsLibuv = text.split(separator: "\n").contains { line in
                line.hasPrefix("import CLibUV") || line.contains(" import CLibUV")
            }
            let path = file.path.replacingOccurrences(of: sources.path + "/", with: "")
            let allowed = path.hasPrefix("ReactiveUV/Loop/") || path.hasPrefix("ReactiveUV/IO/")
            if importsLibuv && !allowed { offenders.append(path) }
        }
        XCTAssertEqual(offenders, [], "these files import CLibUV outside Loop/ and IO/")
    }
}

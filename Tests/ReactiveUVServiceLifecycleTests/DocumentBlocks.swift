import Foundation
import XCTest

// The same check as ReactiveUVTests/Support/DocumentBlocks.swift (test targets share no code).

/// Checks that the ```` ```swift ```` block containing `marker` in `document` (a path from the
/// package root: the README, a guide in docs/guides, or an article of a DocC catalog) has exactly the
/// lines between `// <tag>-BEGIN` and `// <tag>-END` in `sourceFile` (indentation and `import` lines
/// aside), so the compiler checks the document's examples through the test that holds them.
func assertDocumentBlock(_ document: String, containing marker: String, matches tag: String,
                         in sourceFile: String = #filePath,
                         file: StaticString = #filePath, line: UInt = #line) throws {
    let here = URL(fileURLWithPath: sourceFile)
    var root = here.deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: root.appendingPathComponent("Package.swift").path), root.path != "/" {
        root.deleteLastPathComponent()
    }
    let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
    let source = try String(contentsOf: here, encoding: .utf8)
    let blocks = text.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
    let block = try XCTUnwrap(blocks.first { $0.contains(marker) }, "\(document) has no example containing \(marker)", file: file, line: line)
    func normalized(_ text: some StringProtocol) -> [String] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.hasPrefix("import ") }
        return Array(lines.drop { $0.isEmpty }.reversed().drop { $0.isEmpty }.reversed())
    }
    let body = source.components(separatedBy: "// \(tag)-BEGIN\n")[1].components(separatedBy: "// \(tag)-END")[0]
    XCTAssertEqual(normalized(block), normalized(body),
                   "\(document)'s example with \(marker) and the code between the \(tag) markers in \(here.lastPathComponent) must stay identical",
                   file: file, line: line)
}

import Foundation
import XCTest

/// Checks that the README's code block containing `marker` has exactly the lines between
/// `// <tag>-BEGIN` and `// <tag>-END` in `source` (indentation and `import` lines aside),
/// so the compiler checks the README's examples through the test that holds them.
func assertReadmeBlock(containing marker: String, matches tag: String, in sourceFile: String = #filePath,
                       file: StaticString = #filePath, line: UInt = #line) throws {
    let here = URL(fileURLWithPath: sourceFile)
    var root = here.deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: root.appendingPathComponent("README.md").path), root.path != "/" {
        root.deleteLastPathComponent()
    }
    let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    let source = try String(contentsOf: here, encoding: .utf8)
    let blocks = readme.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
    let block = try XCTUnwrap(blocks.first { $0.contains(marker) }, "the README has no example containing \(marker)", file: file, line: line)
    func normalized(_ text: some StringProtocol) -> [String] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.hasPrefix("import ") }
        return Array(lines.drop { $0.isEmpty }.reversed().drop { $0.isEmpty }.reversed())
    }
    let body = source.components(separatedBy: "// \(tag)-BEGIN\n")[1].components(separatedBy: "// \(tag)-END")[0]
    XCTAssertEqual(normalized(block), normalized(body),
                   "README.md's example with \(marker) and the code between the \(tag) markers must stay identical",
                   file: file, line: line)
}

import Foundation
import ReactiveUVTesting
import XCTest

/// Compiles a small program against the ReactiveUV modules of the build the tests run from.
///
/// For tests that pin what the compiler accepts and rejects (Swift 6 isolation
/// of callbacks). The modules are found next to the test bundle, so the tests
/// check the build they belong to (`.build`, or a sanitizer's `--scratch-path`).
struct SnippetCompiler {
    /// One `error:` line of the compiler's output.
    struct Diagnostic: CustomStringConvertible {
        let line: Int
        let message: String
        var description: String { "line \(line): \(message)" }
    }

    /// What one compilation gave.
    struct Outcome {
        let status: Int32
        let output: String
        /// The errors reported in the snippet itself.
        let errors: [Diagnostic]
    }

    let swiftc: URL
    let buildDirectory: URL
    let packageRoot: URL

    /// Finds the compiler and the built modules; throws `XCTSkip` only when the modules are not there.
    init(testFile: StaticString = #filePath) throws {
        buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let module = buildDirectory.appendingPathComponent("Modules/ReactiveUV.swiftmodule")
        guard FileManager.default.fileExists(atPath: module.path) else {
            throw XCTSkip("no ReactiveUV.swiftmodule next to the test bundle (looked in \(buildDirectory.path)): "
                          + "this build keeps its modules elsewhere, so snippets cannot be compiled against it")
        }
        var root = URL(fileURLWithPath: "\(testFile)").deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: root.appendingPathComponent("Package.swift").path) {
            guard root.path != "/" else { throw SnippetCompilerError("no Package.swift above \(testFile)") }
            root.deleteLastPathComponent()
        }
        packageRoot = root
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        guard let found = path.split(separator: ":").map({ URL(fileURLWithPath: String($0)).appendingPathComponent("swiftc") })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw SnippetCompilerError("no swiftc on PATH (\(path))")
        }
        swiftc = found
    }

    /// Compiles `source` in Swift 6 mode through SIL diagnostics (type checking, then the
    /// region-based isolation checks that `-typecheck` alone does not run), producing nothing.
    ///
    /// - Parameters:
    ///   - source: The program.
    ///   - fileName: `main.swift` compiles it as top-level code; any other name as a library.
    func compile(_ source: String, fileName: String = "snippet.swift") throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("reactiveuv-snippet-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }  // best effort: a temporary folder
        let file = directory.appendingPathComponent(fileName)
        try source.write(to: file, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = swiftc
        var arguments = ["-emit-sil", "-o", "/dev/null", "-swift-version", "6"]
        if fileName != "main.swift" { arguments.append("-parse-as-library") }
        arguments += [
            "-I", buildDirectory.appendingPathComponent("Modules").path,
            "-Xcc", "-fmodule-map-file=\(buildDirectory.appendingPathComponent("CReactiveUVThreadLocal.build/module.modulemap").path)",
            "-Xcc", "-I", "-Xcc", packageRoot.appendingPathComponent("Sources/CReactiveUVThreadLocal/include").path,
            "-Xcc", "-fmodule-map-file=\(buildDirectory.appendingPathComponent("CReactiveUVByteScan.build/module.modulemap").path)",
            "-Xcc", "-I", "-Xcc", packageRoot.appendingPathComponent("Sources/CReactiveUVByteScan/include").path,
            "-Xcc", "-fmodule-map-file=\(packageRoot.appendingPathComponent("CLibUV/module.modulemap").path)",
            "-Xcc", "-fmodule-map-file=\(packageRoot.appendingPathComponent("COpenSSL/module.modulemap").path)",
            file.path,
        ]
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // Read to the end before waiting, so a full pipe cannot stall the compiler.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        let prefix = file.path + ":"
        let errors = text.split(separator: "\n").compactMap { line -> Diagnostic? in
            guard line.hasPrefix(prefix) else { return nil }
            let fields = line.dropFirst(prefix.count).split(separator: ":", maxSplits: 3)
            guard fields.count == 4, let number = Int(fields[0]), fields[2] == " error" else { return nil }
            return Diagnostic(line: number, message: fields[3].trimmingCharacters(in: .whitespaces))
        }
        return Outcome(status: process.terminationStatus, output: text, errors: errors)
    }

    /// The lines of `source` marked `// expect: TEXT`, with TEXT.
    static func expectations(in source: String) -> [(line: Int, text: String)] {
        source.split(separator: "\n", omittingEmptySubsequences: false).enumerated().compactMap { index, line in
            guard let range = line.range(of: "// expect: ") else { return nil }
            return (index + 1, String(line[range.upperBound...]))
        }
    }
}

/// The snippet compiler could not be set up.
struct SnippetCompilerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

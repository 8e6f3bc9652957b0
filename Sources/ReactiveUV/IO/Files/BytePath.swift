/// A path as the kernel takes it: NUL-terminated bytes, which need not be UTF-8 (shown with U+FFFD for bad bytes).
/// Thread rule: a value type; safe from any thread.
struct BytePath: Equatable, CustomStringConvertible {
    /// The path's bytes and a final NUL.
    private var bytes: [CChar]

    init(_ path: String) {
        bytes = Array(path.utf8CString)
    }

    private init(bytes: [CChar]) {
        self.bytes = bytes
    }

    /// This directory's entry `name` (its bytes, no NUL), with one `/` between.
    func appending(_ name: [CChar]) -> BytePath {
        var joined = bytes.dropLast() as ArraySlice<CChar>
        if joined.last != CChar(UInt8(ascii: "/")) { joined.append(CChar(UInt8(ascii: "/"))) }
        joined.append(contentsOf: name)
        joined.append(0)
        return BytePath(bytes: Array(joined))
    }

    /// Lends the NUL-terminated bytes to a C call.
    func withCString<Result, Failure: Error>(_ body: (UnsafePointer<CChar>) throws(Failure) -> Result) throws(Failure) -> Result {
        try bytes.withUnsafeBufferPointer { (buffer) throws(Failure) in try body(buffer.baseAddress!) }
    }

    var description: String {
        String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

import CReactiveUVByteScan
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The block search behind `lines()` and `split(separator:)` with one byte (`reactiveuv_find_byte`,
/// 64 bytes at a time) and the inline copy of each line (`reactiveuv_copy_bytes`): separators on either side of a block's edge, in a chunk's last byte, in a
/// chunk shorter than a block, lines longer than a block, limits at a block's edge. Each case is
/// checked against a byte-by-byte splitter, so an offset or a mask off by one shows as a wrong line.
final class FramingBlockScanTests: XCTestCase {
    // MARK: helpers

    /// What `lines(maxLength:)` (or `split(separator:maxLength:)` without `dropsCarriageReturn`)
    /// sends for the concatenated chunks, found byte by byte: the pieces, and whether the stream
    /// ends with `lineTooLong` instead of completing.
    private func expected(_ chunks: [[UInt8]], separator: UInt8, dropsCarriageReturn: Bool, maxLength: Int)
        -> (pieces: [[UInt8]], fails: Bool) {
        var pieces: [[UInt8]] = []
        var piece: [UInt8] = []
        func finish() -> Bool {
            if dropsCarriageReturn && piece.last == UInt8(ascii: "\r") { piece.removeLast() }
            if piece.count > maxLength { return false }
            pieces.append(piece)
            piece = []
            return true
        }
        for byte in chunks.joined() {
            if byte == separator {
                if !finish() { return (pieces, true) }
            } else {
                piece.append(byte)
            }
        }
        if !piece.isEmpty && !finish() { return (pieces, true) }
        return (pieces, false)
    }

    /// Feeds `chunks` synchronously to `apply`, and checks its pieces and its end against `expected`.
    private func assertCut(_ chunks: [[UInt8]], separator: UInt8 = UInt8(ascii: "\n"), maxLength: Int = 1 << 16,
                           _ message: @autoclosure () -> String = "",
                           file: StaticString = #filePath, line: UInt = #line) {
        let dropsCarriageReturn = separator == UInt8(ascii: "\n")
        let source = Signal<[UInt8]> { subscriber in
            for chunk in chunks { subscriber.sendNext(chunk) }
            subscriber.sendCompleted()
            return nil
        }
        let cut = dropsCarriageReturn
            ? source.lines(maxLength: maxLength)
            : source.split(separator: separator, maxLength: maxLength)
        let recorder = TestScheduler().record(cut)
        let want = expected(chunks, separator: separator, dropsCarriageReturn: dropsCarriageReturn, maxLength: maxLength)
        let sizes = chunks.map(\.count)
        XCTAssertEqual(recorder.values.map(\.count), want.pieces.map(\.count), "piece lengths, chunks \(sizes) \(message())", file: file, line: line)
        XCTAssertEqual(recorder.values, want.pieces, "pieces, chunks \(sizes) \(message())", file: file, line: line)
        if want.fails {
            XCTAssertEqual(recorder.terminal.map { "\($0)" }, "error(\(FramingError.lineTooLong(limit: maxLength)))",
                           "chunks \(sizes) \(message())", file: file, line: line)
        } else {
            XCTAssertEqual(recorder.terminal.map { "\($0)" }, "completed", "chunks \(sizes) \(message())", file: file, line: line)
        }
    }

    /// `count` bytes of letters (varying, never a separator, CR or NUL), with `separator` at each of `at`.
    private func bytes(_ count: Int, separator: UInt8 = UInt8(ascii: "\n"), at positions: [Int]) -> [UInt8] {
        var bytes = (0..<count).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        for position in positions { bytes[position] = separator }
        return bytes
    }

    // MARK: the search itself, every way this machine has

    /// `reactiveuv_find_byte` by each of its ways (the portable loop, SSE2, AVX2 when the CPU has
    /// it, and the one chosen) finds exactly the offsets a byte-by-byte search finds, from any
    /// start, in buffers of 0 to 260 bytes (under a block, a block, blocks and a tail), with a
    /// separator dense or sparse, in the first and last byte, and NUL as the byte looked for (the
    /// zeros a short tail is padded with are not separators); asked again from where it stopped
    /// until the end, it never writes past the room it was given.
    func testFindByteFindsWhatAByteByByteSearchFindsByEveryWay() {
        let block = Int(REACTIVEUV_FIND_BYTE_BLOCK)
        var ways: [Int32] = []
        for way: Int32 in 0...3 {
            var scanned = 0
            var room = [Int32](repeating: 0, count: block)
            if reactiveuv_find_byte_using(way, [1], 0, 1, 1, &room, block, &scanned) >= 0 { ways.append(way) }
        }
        // Room for one block (searched one at a time), for two (two at a time), and between.
        for capacity in [block, 2 * block, 2 * block + 37, 4 * block] {
            checkFindByte(ways: ways, capacity: capacity)
        }
    }

    private func checkFindByte(ways: [Int32], capacity: Int) {
        XCTAssertTrue(ways.contains(1) && ways.contains(0), "the portable and the chosen way exist everywhere: \(ways)")
        // Room for `capacity` offsets, then a guard the search must not write into.
        var room = [Int32](repeating: -7, count: capacity + 8)
        for length in 0...260 {
            for density in [1, 7, 64, 65, 1_000] {
                // NUL only in buffers under two blocks: where a tail is padded with zeros.
                for needle: UInt8 in length < 128 ? [0, 10] : [10] {
                    // The needle at every density-th byte, and in the last byte.
                    var buffer = (0..<length).map { UInt8(1 + $0 % 200) }
                    for position in stride(from: density - 1, to: length, by: density) { buffer[position] = needle }
                    if length > 0 { buffer[length - 1] = needle }
                    for from in Set([0, 1, 63, 64, 65, length / 2, length].filter { $0 <= length }) {
                        let truth = (from..<length).filter { buffer[$0] == needle }
                        for way in ways {
                            var found: [Int] = []
                            var position = from
                            while position < length {
                                var scanned = 0
                                let written = reactiveuv_find_byte_using(way, buffer, position, length, needle, &room, capacity, &scanned)
                                guard written >= 0 && written <= capacity && scanned > position && scanned <= length else {
                                    XCTFail("way \(way), length \(length), from \(position): wrote \(written), scanned to \(scanned)")
                                    return
                                }
                                guard room[capacity...].allSatisfy({ $0 == -7 }) else {
                                    XCTFail("way \(way) wrote past its room of \(capacity)")
                                    return
                                }
                                for index in 0..<written { found.append(position + Int(room[index])) }
                                position = scanned
                            }
                            if found != truth {
                                XCTFail("way \(way), room \(capacity), length \(length), density \(density), needle \(needle), from \(from): \(found) != \(truth)")
                                return
                            }
                        }
                    }
                }
            }
        }
    }

    /// `reactiveuv_copy_bytes` (each line's copy into the storage it reuses) copies exactly
    /// `count` bytes for every count from 0 to 300 (each of its size classes and their edges, 16,
    /// 32, 64, 128, and past them to `memcpy`), from any alignment, touching no byte around them.
    func testCopyBytesCopiesExactlyItsCountAtEverySize() {
        let source = (0..<340).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        for count in 0...300 {
            for shift in [0, 1, 7] {
                var target = [UInt8](repeating: 0xEE, count: count + 40)
                source.withUnsafeBufferPointer { from in
                    target.withUnsafeMutableBufferPointer { to in
                        reactiveuv_copy_bytes(to.baseAddress! + 20, from.baseAddress! + shift, count)
                    }
                }
                let expected = [UInt8](repeating: 0xEE, count: 20) + source[shift..<(shift + count)] + [UInt8](repeating: 0xEE, count: 20)
                if target != expected {
                    XCTFail("copy of \(count) bytes from offset \(shift): \(target) != \(expected)")
                    return
                }
            }
        }
    }

    // MARK: lines at block edges

    /// Blocks start where the cut starts (the chunk's start, or after a line that straddled from
    /// the chunk before): a separator as the last byte of a block, the first of the next, and
    /// either side of the second edge, seen from both starts.
    func testSeparatorsOnEitherSideOfABlockEdgeEndTheirLines() {
        for positions in [[63], [64], [62, 63, 64, 65], [63, 127, 128], [0, 64, 128, 191, 192], [126, 127]] {
            assertCut([bytes(200, at: positions)], "LF at \(positions)")
            // The chunk before leaves 5 bytes pending: this chunk's cut starts after the first LF.
            assertCut([bytes(5, at: []), bytes(206, at: [0] + positions.map { $0 + 6 })], "LF at 0 and \(positions) + 6")
        }
        // With CRLF: the CR in one block, the LF in the next.
        var crlf = bytes(200, at: [64, 130])
        crlf[63] = UInt8(ascii: "\r")
        crlf[129] = UInt8(ascii: "\r")
        assertCut([crlf], "CR at 63 and 129")
    }

    /// A separator in the last byte of a chunk (whose last block overlaps the one before, or is
    /// the whole chunk), and the lines after it in the next chunk.
    func testASeparatorInTheLastByteOfAChunkEndsItsLine() {
        for size in [1, 2, 63, 64, 65, 100, 127, 128, 129, 191, 192, 193] {
            assertCut([bytes(size, at: [size - 1]), bytes(10, at: [4, 9])], "LF last of \(size)")
            // And one just before the last, a line of one byte left pending.
            if size >= 2 { assertCut([bytes(size, at: [size - 2]), bytes(10, at: [4])], "LF next to last of \(size)") }
            // And only in the last block's overlap: found once, not twice.
            if size > 64 { assertCut([bytes(size, at: [size - 64, size - 1])], "LF at \(size - 64) and last of \(size)") }
        }
    }

    /// A CR that ends one chunk and the LF that starts the next end one line, without its CR, at
    /// any chunk size around a block; the lines after the LF are found from there.
    func testACREndingOneChunkAndTheLFStartingTheNextEndOneLine() {
        for size in [1, 2, 63, 64, 65, 128, 129] {
            var first = bytes(size, at: size > 40 ? [20] : [])
            first[size - 1] = UInt8(ascii: "\r")
            assertCut([first, bytes(70, at: [0, 64, 69])], "CR ends a chunk of \(size)")
        }
    }

    /// Lines of 63 to 200 bytes, several blocks each, in chunks of 300 and of 1,000 bytes: every
    /// line whole, whichever block its LF falls in.
    func testLinesLongerThanABlockComeOutWhole() {
        var stream: [UInt8] = []
        for length in 63...200 { stream += bytes(length, at: []) + (length % 3 == 0 ? [13, 10] : [10]) }
        for size in [300, 1_000] {
            let chunks = stride(from: 0, to: stream.count, by: size).map { Array(stream[$0..<min($0 + size, stream.count)]) }
            assertCut(chunks, "chunks of \(size)")
        }
    }

    /// One chunk of more lines than one search has room for (256 offsets): 3,000 lines of 0 to 9
    /// bytes, runs of empty lines among them (blocks of 64 separators), so the driver searches
    /// the chunk again and again from where the last search stopped, each line whole.
    func testMoreLinesInOneChunkThanOneSearchFindsAreAllCut() {
        var stream: [UInt8] = []
        for index in 0..<3_000 {
            let length = index % 500 < 150 ? 0 : index % 10
            stream += bytes(length, at: []) + (index % 7 == 0 ? [13, 10] : [10])
        }
        assertCut([stream], "\(stream.count) bytes in one chunk")
        assertCut([Array(stream[..<5_001]), Array(stream[5_001...])], "two chunks")
        // The end of each search's offsets is noticed whatever the limit, the largest too.
        assertCut([stream], maxLength: Int.max, "no limit to speak of")
        assertCut([Array(stream[..<5_001]), Array(stream[5_001...])], maxLength: 1 << 40, "a limit past any offset")
    }

    /// Chunks shorter than a block (copied into a block of zeros to be searched): every line of
    /// each, and a NUL separator is found only where the chunk has one, never in the padding.
    func testChunksShorterThanABlockAreCutWhole() {
        for size in [1, 3, 16, 32, 62, 63] {
            let stream = bytes(size * 7, at: Array(stride(from: 2, to: size * 7, by: 5)))
            let chunks = stride(from: 0, to: stream.count, by: size).map { Array(stream[$0..<min($0 + size, stream.count)]) }
            assertCut(chunks, "chunks of \(size)")
            let nuls = bytes(size * 7, separator: 0, at: Array(stride(from: 2, to: size * 7, by: 5)))
            let nulChunks = stride(from: 0, to: nuls.count, by: size).map { Array(nuls[$0..<min($0 + size, nuls.count)]) }
            assertCut(nulChunks, separator: 0, "NUL-separated, chunks of \(size)")
        }
        // One chunk of a few bytes and no separator but the padding's value.
        assertCut([[1, 2, 3]], separator: 0, "no NUL in the chunk")
    }

    /// A limit of a block's length (64) or one less or more: a line of exactly the limit passes
    /// and one byte more fails, whether its LF is in its block's last byte, the next block's first,
    /// or in a later chunk; a CR before the LF is not counted.
    func testALimitAtABlockEdgeLetsItsLengthThroughAndFailsOneMore() {
        for limit in [63, 64, 65] {
            for length in [limit - 1, limit, limit + 1] {
                let line = bytes(length, at: [])
                assertCut([bytes(10, at: [9]) + line + [10] + bytes(5, at: [4])], maxLength: limit, "line of \(length), limit \(limit)")
                assertCut([bytes(10, at: [9]) + line + [13, 10] + bytes(130, at: [129])], maxLength: limit, "CRLF line of \(length), limit \(limit)")
                assertCut([line + [10], bytes(3, at: [])], maxLength: limit, "first line of \(length), limit \(limit)")
                assertCut([Array(line.prefix(30)), Array(line.dropFirst(30)) + [10]], maxLength: limit, "line of \(length) across chunks, limit \(limit)")
            }
        }
    }
}

import ReactiveUV
import ReactiveUVTesting
import XCTest

/// `lines`, `utf8Lines`, `split` and `frames` on virtual time: chunks cut anywhere, limits, ends, propagation.
final class FramingTests: XCTestCase {
    // MARK: helpers

    /// Sends `chunks` (as UTF-8) at 10, 20, 30 ms, then `terminal` 10 ms after the last; records `apply`'s pieces as text.
    private func run(_ chunks: [String], then terminal: Event<[UInt8]> = .completed,
                     _ apply: (Signal<[UInt8]>) -> Signal<[UInt8]>) -> (timeline: [String], source: TestSource<[UInt8]>) {
        runBytes(chunks.map { Array($0.utf8) }, then: terminal, apply)
    }

    private func runBytes(_ chunks: [[UInt8]], then terminal: Event<[UInt8]> = .completed,
                          _ apply: (Signal<[UInt8]>) -> Signal<[UInt8]>) -> (timeline: [String], source: TestSource<[UInt8]>) {
        let timed = chunks.enumerated().map { (10 * ($0.offset + 1), Event<[UInt8]>.next($0.element)) } + [(10 * (chunks.count + 1), terminal)]
        let source = TestSource(timed)
        let test = TestScheduler()
        let recorder = test.record(apply(source.signal).map { String(decoding: $0, as: UTF8.self) })
        test.run()
        return (recorder.timeline, source)
    }

    /// The pieces `apply` makes of `chunks`, sent synchronously, and how the signal ended.
    private func pieces(_ chunks: [[UInt8]], _ apply: (Signal<[UInt8]>) -> Signal<[UInt8]>) -> (pieces: [[UInt8]], end: String) {
        let source = Signal<[UInt8]> { subscriber in
            for chunk in chunks { subscriber.sendNext(chunk) }
            subscriber.sendCompleted()
            return nil
        }
        let recorder = TestScheduler().record(apply(source))
        return (recorder.values, recorder.terminal.map { "\($0)" } ?? "no end")
    }

    /// Every way of cutting `bytes` into three chunks (some empty), each fed to `apply`.
    private func assertEveryCut(_ bytes: [UInt8], gives expected: [[UInt8]], end: String = "completed",
                                file: StaticString = #filePath, line: UInt = #line,
                                _ apply: (Signal<[UInt8]>) -> Signal<[UInt8]>) {
        for first in 0...bytes.count {
            for second in first...bytes.count {
                let chunks = [Array(bytes[..<first]), Array(bytes[first..<second]), Array(bytes[second...])]
                let result = pieces(chunks, apply)
                if result.pieces != expected || result.end != end {
                    XCTFail("cut at \(first), \(second): \(result.pieces.map { String(decoding: $0, as: UTF8.self) }) then \(result.end)",
                            file: file, line: line)
                    return
                }
            }
        }
    }

    private func utf8(_ strings: String...) -> [[UInt8]] { strings.map { Array($0.utf8) } }

    // MARK: lines

    func testLinesCutAnywhereAcrossChunksComeOutWhole() {
        let text = Array("ab\ncd\r\nef\n\n\r\ngh\r".utf8)
        assertEveryCut(text, gives: utf8("ab", "cd", "ef", "", "", "gh")) { $0.lines() }
    }

    func testACRLFSplitAcrossChunksEndsTheLineWhenTheLFArrives() {
        let (timeline, _) = run(["one\r", "\ntwo\r", "\n"]) { $0.lines() }
        XCTAssertEqual(timeline, ["next(one)@20", "next(two)@30", "completed@40"])
    }

    func testACROnlyBeforeLFIsRemoved() {
        let (timeline, _) = run(["a\rb\n\r\r\n"]) { $0.lines() }
        XCTAssertEqual(timeline, ["next(a\rb)@10", "next(\r)@10", "completed@20"])
    }

    func testEmptyLinesAndAFinalLineWithoutTerminator() {
        XCTAssertEqual(run(["\n\n"]) { $0.lines() }.timeline, ["next()@10", "next()@10", "completed@20"])
        XCTAssertEqual(run(["last"]) { $0.lines() }.timeline, ["next(last)@20", "completed@20"],
                       "a final line without LF is sent when the signal completes")
        XCTAssertEqual(run(["a\n"]) { $0.lines() }.timeline, ["next(a)@10", "completed@20"], "no empty line after the last LF")
        XCTAssertEqual(run([]) { $0.lines() }.timeline, ["completed@10"])
        XCTAssertEqual(run(["", ""]) { $0.lines() }.timeline, ["completed@30"], "empty chunks are nothing")
    }

    func testALineOfExactlyMaxLengthPassesAndOneByteMoreFails() {
        // In one chunk, across chunks, with CRLF, and as the final line.
        XCTAssertEqual(run(["abcd\n"]) { $0.lines(maxLength: 4) }.timeline, ["next(abcd)@10", "completed@20"])
        XCTAssertEqual(run(["ab", "cd\r", "\n"]) { $0.lines(maxLength: 4) }.timeline, ["next(abcd)@30", "completed@40"])
        XCTAssertEqual(run(["abcd"]) { $0.lines(maxLength: 4) }.timeline, ["next(abcd)@20", "completed@20"])
        XCTAssertEqual(run(["ok\nabcde\nnever\n"]) { $0.lines(maxLength: 4) }.timeline, ["next(ok)@10", "error(\(FramingError.lineTooLong(limit: 4)))@10"])
        XCTAssertEqual(run(["ab", "cde\n"]) { $0.lines(maxLength: 4) }.timeline, ["error(\(FramingError.lineTooLong(limit: 4)))@20"])
        XCTAssertEqual(run(["abcd", "e"]) { $0.lines(maxLength: 4) }.timeline, ["error(\(FramingError.lineTooLong(limit: 4)))@30"],
                       "a final line one byte too long fails at completion")
        assertEveryCut(Array("abcd\r\nabcd\nabcd".utf8), gives: utf8("abcd", "abcd", "abcd")) { $0.lines(maxLength: 4) }
        assertEveryCut(Array("abcd\r\nabcd\nabcde".utf8), gives: utf8("abcd", "abcd"), end: "error(\(FramingError.lineTooLong(limit: 4)))") {
            $0.lines(maxLength: 4)
        }
    }

    /// A peer that never sends LF: the error comes as soon as the bytes held would exceed the
    /// limit (plus a CR that might precede an LF), not when an LF finally arrives; the source is
    /// disposed then and the lines before it were sent.
    func testALineOverTheLimitFailsBeforeItsEndArrivesAndDisposesTheSource() {
        let (timeline, source) = run(["ok\nab", "cde", "f", "never\n"]) { $0.lines(maxLength: 4) }
        XCTAssertEqual(timeline, ["next(ok)@10", "error(a line longer than 4 bytes (the limit); the signal ended before buffering more)@30"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@30"])
        // One chunk holding a long tail fails at once too.
        XCTAssertEqual(run([String(repeating: "x", count: 100)]) { $0.lines(maxLength: 10) }.timeline,
                       ["error(\(FramingError.lineTooLong(limit: 10)))@10"])
    }

    func testErrorsAndDisposalPropagate() {
        assertPropagatesErrorAndDisposal("lines") { $0.map { Array("\($0)\n".utf8) }.lines() }
        assertPropagatesErrorAndDisposal("utf8Lines") { $0.map { Array("\($0)\n".utf8) }.utf8Lines() }
        assertPropagatesErrorAndDisposal("split") { $0.map { Array("\($0),".utf8) }.split(separator: UInt8(ascii: ",")) }
        assertPropagatesErrorAndDisposal("frames") { $0.map { [1, UInt8(truncatingIfNeeded: $0)] }.frames(lengthPrefix: .uint8) }
        assertFinishedPipelineIsFreed("lines") { signal, token in signal.map { _ in token.touch(); return [10] }.lines() }
        // A partial line is dropped when the source fails: the error, not the fragment.
        XCTAssertEqual(run(["abc"], then: .error(TestError("reset"))) { $0.lines() }.timeline, ["error(reset)@20"])
    }

    func testUTF8LinesDecodeAndReplaceInvalidBytes() {
        let source = Signal<[UInt8]> { subscriber in
            subscriber.sendNext([0x68, 0xC3])  // "h", then the first byte of "é"
            subscriber.sendNext([0xA9, 0x0D, 0x0A, 0x66, 0xFF, 0x0A, 0xE2, 0x82])  // the rest of "é", CRLF, "f", garbage, LF, half a "€"
            subscriber.sendCompleted()
            return nil
        }
        let recorder = TestScheduler().record(source.utf8Lines())
        XCTAssertEqual(recorder.values, ["hé", "f\u{FFFD}", "\u{FFFD}"])
        XCTAssertEqual(recorder.terminal.map { "\($0)" }, "completed")
    }

    func testANonPositiveMaxLengthOrAnEmptySeparatorIsEINVALWithoutSubscribing() {
        let cases: [(String, String, (Signal<[UInt8]>) -> Signal<[UInt8]>)] = [
            ("lines(maxLength: 0)", "maxLength must be positive, got 0", { $0.lines(maxLength: 0) }),
            ("lines(maxLength: -1)", "maxLength must be positive, got -1", { $0.lines(maxLength: -1) }),
            ("utf8Lines(maxLength: 0)", "maxLength must be positive, got 0", { $0.utf8Lines(maxLength: 0).map { Array($0.utf8) } }),
            ("split(maxLength: 0)", "maxLength must be positive, got 0", { $0.split(separator: 0, maxLength: 0) }),
            ("split(separator: [])", "separator must not be empty", { $0.split(separator: []) }),
            ("frames(maxLength: 0)", "maxLength must be positive, got 0", { $0.frames(lengthPrefix: .uint16BigEndian, maxLength: 0) }),
        ]
        for (what, words, apply) in cases {
            let source = TestSource<[UInt8]>(events((0, .next([10])), (0, .completed)))
            let recorder = TestScheduler().record(apply(source.signal))
            guard recorder.events.count == 1, case .error(let error as UVError)? = recorder.terminal else {
                XCTFail("\(what): expected one UVError, got \(recorder.events)")
                continue
            }
            XCTAssertEqual(error, .invalidArgument, what)
            XCTAssertTrue(error.message.contains(words), "\(what): \(error.message)")
            XCTAssertEqual(source.subscriptionCount, 0, "\(what): the source must not be subscribed")
        }
    }

    /// A subscriber that makes the source send again while a chunk is being cut (it feeds the
    /// subject it reads from), then completes it: the new bytes are cut after the rest of the
    /// current chunk (byte order), and the completion still brings the last line first.
    func testReentrantChunksAreCutAfterTheRestOfTheCurrentOne() {
        let subject = Subject<[UInt8]>()
        let log = Locked<[String]>([])
        let test = TestScheduler()
        let subscription = test.performAsCurrent {
            subject.utf8Lines().subscribe(
                next: { line in
                    log.withLock { $0.append(line) }
                    if line == "a" { subject.sendNext(Array("c\nd".utf8)) }  // re-entrant, while "a\nb\n" is being cut
                    if line == "c" { subject.sendCompleted() }  // re-entrant too: "d" is still held
                },
                completed: { log.withLock { $0.append("completed") } })
        }
        test.performAsCurrent { subject.sendNext(Array("a\nb\n".utf8)) }
        XCTAssertEqual(log.current, ["a", "b", "c", "d", "completed"])
        subscription.dispose()
    }

    /// `take` after `lines`: the rest of the chunk is not cut once the subscription is disposed.
    func testADownstreamThatHadEnoughStopsTheCutting() {
        let cut = Locked(0)
        let source = Signal<[UInt8]> { subscriber in
            subscriber.sendNext(Array("a\nb\nc\nd\n".utf8))
            return nil
        }
        let recorder = TestScheduler().record(source.lines().doNext { _ in cut.withLock { $0 += 1 } }.take(2))
        XCTAssertEqual(recorder.values.map { String(decoding: $0, as: UTF8.self) }, ["a", "b"])
        XCTAssertEqual(cut.current, 2, "lines were cut after take(2) completed")
    }

    /// A subscriber of `lines` (the sink fed by the driver's tight loop) that disposes its own
    /// subscription inside a line's callback gets no further line of that chunk, nor of the next:
    /// the loop reads the disposed flag once per line, after the line, and the sink does not.
    func testASubscriberDisposingInsideALineGetsNoMoreLines() {
        let subject = Subject<[UInt8]>()
        let received = Locked<[String]>([])
        let handle = Locked<(any Disposable)?>(nil)
        let test = TestScheduler()
        let subscription = test.performAsCurrent {
            subject.lines().subscribeNext { line in
                received.withLock { $0.append(String(decoding: line, as: UTF8.self)) }
                if line == Array("b".utf8) { handle.current?.dispose() }
            }
        }
        handle.withLock { $0 = subscription }
        test.performAsCurrent {
            subject.sendNext(Array("a\nb\nc\r\nd\n".utf8))
            subject.sendNext(Array("e\n".utf8))
        }
        XCTAssertEqual(received.current, ["a", "b"])
        XCTAssertTrue(subscription.isDisposed)
    }

    /// A piece's storage may be reused for the next piece once the subscriber let it go (no
    /// allocation per line), never while the subscriber holds it: every line and frame it kept,
    /// whether the one before was kept or let go, still reads as it was sent when the stream ends.
    func testPiecesTheSubscriberKeepsAreNeverOverwrittenByLaterOnes() throws {
        // Lengths 60 to 66: each fits the storage of the one before, so reuse is tried for every piece.
        let texts = (0..<300).map { index in
            String(repeating: String(UnicodeScalar(UInt8(ascii: "a") + UInt8(index % 26))), count: 60 + index % 7)
        }
        let lineStream = Array(texts.map { $0 + "\n" }.joined().utf8)
        let frameStream = try texts.flatMap { try LengthPrefix.uint16BigEndian.frame(Array($0.utf8)) }
        let cases: [(String, [UInt8], (Signal<[UInt8]>) -> Signal<[UInt8]>)] = [
            ("lines", lineStream, { $0.lines() }),
            ("frames", frameStream, { $0.frames(lengthPrefix: .uint16BigEndian) }),
        ]
        for (name, bytes, apply) in cases {
            // Chunks of 1,000 bytes: pieces inside one chunk and pieces across two.
            let chunks = stride(from: 0, to: bytes.count, by: 1_000).map { Array(bytes[$0..<min($0 + 1_000, bytes.count)]) }
            let source = Signal<[UInt8]> { subscriber in
                for chunk in chunks { subscriber.sendNext(chunk) }
                subscriber.sendCompleted()
                return nil
            }
            let kept = Locked<[(index: Int, piece: [UInt8])]>([])
            let received = Locked(0)
            let test = TestScheduler()
            let subscription = test.performAsCurrent {
                apply(source).subscribeNext { piece in
                    let index = received.withLock { count in
                        count += 1
                        return count - 1
                    }
                    if index % 3 == 0 { kept.withLock { $0.append((index, piece)) } }  // one in three kept, two let go
                }
            }
            XCTAssertEqual(received.current, texts.count, name)
            XCTAssertEqual(kept.current.count, texts.count / 3, name)
            let changed = kept.current.filter { $0.piece != Array(texts[$0.index].utf8) }
            XCTAssertEqual(changed.map(\.index), [], "\(name): pieces kept by the subscriber were changed by later ones")
            subscription.dispose()
        }
    }

    /// Lines the subscriber lets go are written into the storage of the one before: each reads
    /// whole as it is delivered, whether it is longer, shorter or as long as the one before, inside
    /// one chunk or across two, CRLF or LF, empty or not.
    func testLinesWrittenIntoTheStorageOfTheOneBeforeReadWholeWhenDelivered() {
        let lengths = [60, 60, 61, 59, 66, 60, 0, 5, 64, 64, 58, 1, 70, 63, 63, 62]
        let texts = lengths.enumerated().map { index, length in
            String((0..<length).map { Character(UnicodeScalar(UInt8(ascii: "a") + UInt8((index + $0) % 26))) })
        }
        let bytes = Array(texts.enumerated().map { $0.element + ($0.offset % 3 == 0 ? "\r\n" : "\n") }.joined().utf8)
        for chunkSize in [7, 200, bytes.count] {
            let chunks = stride(from: 0, to: bytes.count, by: chunkSize).map { Array(bytes[$0..<min($0 + chunkSize, bytes.count)]) }
            let source = Signal<[UInt8]> { subscriber in
                for chunk in chunks { subscriber.sendNext(chunk) }
                subscriber.sendCompleted()
                return nil
            }
            let received = Locked<[String]>([])
            let test = TestScheduler()
            let subscription = test.performAsCurrent {
                source.lines().subscribeNext { line in received.append(String(decoding: line, as: UTF8.self)) }  // line let go
            }
            XCTAssertEqual(received.current, texts, "chunks of \(chunkSize) bytes")
            subscription.dispose()
        }
    }

    // MARK: split

    func testSplitAtOneByteKeepsEmptyPieces() {
        assertEveryCut(Array(",a,,b,c".utf8), gives: utf8("", "a", "", "b", "c")) { $0.split(separator: UInt8(ascii: ",")) }
        // No CR handling: it is a piece's byte like any other.
        assertEveryCut(Array("a\r\nb".utf8), gives: utf8("a\r", "b")) { $0.split(separator: UInt8(ascii: "\n")) }
    }

    func testSplitAtSeveralBytesFindsSeparatorsCutAcrossChunks() {
        let separator = Array("\r\n\r\n".utf8)
        assertEveryCut(Array("head\r\n1\r\n\r\nbody\r\n\r\n\r\n\r\n\r\ntail\r\n".utf8), gives: utf8("head\r\n1", "body", "", "\r\ntail\r\n")) {
            $0.split(separator: separator)
        }
        // A separator that overlaps itself: the earliest match wins, the search goes on after it.
        assertEveryCut(Array("aaa".utf8), gives: utf8("", "a")) { $0.split(separator: Array("aa".utf8)) }
        assertEveryCut(Array("xaabaab".utf8), gives: utf8("x", "")) { $0.split(separator: Array("aab".utf8)) }
    }

    func testSplitLimitCountsThePieceNotItsSeparator() {
        let separator = Array("--".utf8)
        assertEveryCut(Array("abc--abc-".utf8), gives: utf8("abc"), end: "error(\(FramingError.lineTooLong(limit: 3)))") {
            $0.split(separator: separator, maxLength: 3)
        }
        assertEveryCut(Array("abc--abc--ab-".utf8), gives: utf8("abc", "abc", "ab-")) { $0.split(separator: separator, maxLength: 3) }
    }

    // MARK: frames

    func testFramesCutAnywhereComeOutWholeForEveryPrefix() throws {
        let payloads: [[UInt8]] = [Array("hello".utf8), [], Array(repeating: 0x0A, count: 7), [0, 1, 2]]
        for prefix in [LengthPrefix.uint8, .uint16BigEndian, .uint16LittleEndian, .uint32BigEndian, .uint32LittleEndian] {
            let stream = try payloads.flatMap { try prefix.frame($0) }
            assertEveryCut(stream, gives: payloads) { $0.frames(lengthPrefix: prefix) }
        }
    }

    func testFramePrefixesAreWrittenInTheirByteOrder() throws {
        XCTAssertEqual(try LengthPrefix.uint32BigEndian.frame([7, 8]), [0, 0, 0, 2, 7, 8])
        XCTAssertEqual(try LengthPrefix.uint32LittleEndian.frame([7, 8]), [2, 0, 0, 0, 7, 8])
        XCTAssertEqual(try LengthPrefix.uint16BigEndian.frame(Array(repeating: 1, count: 258)).prefix(2), [1, 2])
        XCTAssertEqual(try LengthPrefix.uint16LittleEndian.frame(Array(repeating: 1, count: 258)).prefix(2), [2, 1])
        XCTAssertEqual(try LengthPrefix.uint8.frame([]), [0])
        // Decoding reads the same order: 0x0102 = 258 bytes.
        let bigEndian = pieces([[1, 2] + Array(repeating: 9, count: 258)]) { $0.frames(lengthPrefix: .uint16BigEndian) }
        XCTAssertEqual(bigEndian.pieces.map(\.count), [258])
        let littleEndian = pieces([[2, 1] + Array(repeating: 9, count: 258)]) { $0.frames(lengthPrefix: .uint16LittleEndian) }
        XCTAssertEqual(littleEndian.pieces.map(\.count), [258])
    }

    func testAPayloadTooLongForItsPrefixIsNotEncoded() {
        XCTAssertThrowsError(try LengthPrefix.uint8.frame(Array(repeating: 0, count: 256))) { error in
            XCTAssertEqual(error as? FramingError, .frameTooLong(length: 256, limit: 255))
        }
        XCTAssertEqual(try LengthPrefix.uint8.frame(Array(repeating: 0, count: 255)).count, 256)
        XCTAssertEqual(LengthPrefix.uint32BigEndian.maxPayloadLength, 4_294_967_295)
    }

    /// A prefix announcing more than `maxLength` fails as soon as the prefix is read, before the
    /// payload arrives; exactly `maxLength` passes.
    func testAFrameOverTheLimitFailsWhenItsPrefixArrives() {
        let (timeline, source) = runBytes([[0, 0, 0, 4, 1, 2, 3, 4, 0, 0], [0, 5, 1]]) { $0.frames(lengthPrefix: .uint32BigEndian, maxLength: 4) }
        XCTAssertEqual(timeline, ["next(\u{1}\u{2}\u{3}\u{4})@10", "error(\(FramingError.frameTooLong(length: 5, limit: 4)))@20"])
        XCTAssertEqual(source.history, ["subscribed@0", "disposed@20"])
        // 4 GiB - 1 announced: an error, no allocation of that size.
        let huge = pieces([[0xFF, 0xFF, 0xFF, 0xFF]]) { $0.frames(lengthPrefix: .uint32BigEndian) }
        XCTAssertEqual(huge.end, "error(\(FramingError.frameTooLong(length: 4_294_967_295, limit: 1 << 20)))")
    }

    func testATruncatedFrameAtCompletionIsAnErrorSayingWhatWasMissing() {
        let inPayload = pieces([[0, 2, 7], [8], [0, 10, 1, 2, 3]]) { $0.frames(lengthPrefix: .uint16BigEndian) }
        XCTAssertEqual(inPayload.pieces, [[7, 8]])
        XCTAssertEqual(inPayload.end, "error(\(FramingError.truncatedFrame(received: 5, missing: 7, prefixComplete: true)))")
        XCTAssertEqual("\(FramingError.truncatedFrame(received: 5, missing: 7, prefixComplete: true))",
                       "the bytes ended inside a length-prefixed frame: 7 bytes missing (5 of 12 received)")
        let inPrefix = pieces([[1, 0, 0, 0, 9, 0, 0]]) { $0.frames(lengthPrefix: .uint32LittleEndian) }
        XCTAssertEqual(inPrefix.pieces, [[9]])
        XCTAssertEqual(inPrefix.end, "error(\(FramingError.truncatedFrame(received: 2, missing: 2, prefixComplete: false)))")
        XCTAssertEqual("\(FramingError.truncatedFrame(received: 2, missing: 2, prefixComplete: false))",
                       "the bytes ended inside a frame's length prefix: at least 2 bytes missing (2 of the prefix received)")
    }
}

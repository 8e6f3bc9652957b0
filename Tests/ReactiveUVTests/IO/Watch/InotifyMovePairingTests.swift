import Foundation
@testable import ReactiveUV
import ReactiveUVTesting
import XCTest

/// The rule that pairs a rename's two halves, on events made up here (`InotifyMovePairing`), and once on a
/// real read whose buffer the first half ends.
final class InotifyMovePairingTests: XCTestCase {
    // The <sys/inotify.h> bits.
    private static let movedFrom: UInt32 = 0x40, movedTo: UInt32 = 0x80, create: UInt32 = 0x100, overflow: UInt32 = 0x4000

    private func event(_ mask: UInt32, _ name: String, cookie: UInt32 = 0, watch: Int32 = 1) -> InotifyEvent {
        InotifyEvent(descriptor: watch, mask: mask, cookie: cookie, name: name, nameIsExact: true)
    }

    /// What the pairing hands on for a sequence of events, one line per delivery in order.
    private func deliveries(_ events: [InotifyEvent], releasingAtEnd: Bool = false) -> [String] {
        var pairing = InotifyMovePairing()
        var said: [String] = []
        for event in events {
            let (released, ready) = pairing.next(event)
            if let released { said.append("alone \(released.name)") }
            switch ready {
            case .single(let single)?: said.append("single \(single.name)")
            case .move(let from, let to)?: said.append("move \(from.name) \(to.name)")
            case nil: break
            }
        }
        if releasingAtEnd, let held = pairing.release() { said.append("alone \(held.name)") }
        return said
    }

    func testAMoveToWithTheSameCookieRightAfterItsMoveFromMakesOnePair() {
        XCTAssertEqual(deliveries([event(Self.movedFrom, "a", cookie: 7), event(Self.movedTo, "b", cookie: 7, watch: 2)]), ["move a b"])
    }

    /// Any other event first (a creation, another rename's move-to, another move-from, an overflow) releases the
    /// held half alone, before itself: nothing is delivered out of order.
    func testAnythingElseAfterAMoveFromReleasesItAloneFirst() {
        XCTAssertEqual(deliveries([event(Self.movedFrom, "a", cookie: 7), event(Self.create, "c")]), ["alone a", "single c"])
        XCTAssertEqual(deliveries([event(Self.movedFrom, "a", cookie: 7), event(Self.movedTo, "b", cookie: 8)]), ["alone a", "single b"])
        XCTAssertEqual(deliveries([event(Self.movedFrom, "a", cookie: 7), event(Self.movedFrom, "b", cookie: 8), event(Self.movedTo, "c", cookie: 8)]),
                       ["alone a", "move b c"])
        XCTAssertEqual(deliveries([event(Self.movedFrom, "a", cookie: 7), event(Self.overflow, "", watch: -1)]), ["alone a", "single "])
    }

    /// A move-from that ends the events read stays held (the next read may bring its move-to), and is handed
    /// on alone when given up; a move-to alone is a move in.
    func testAMoveFromLastIsHeldUntilReleasedAndAMoveToAloneIsASingle() {
        XCTAssertEqual(deliveries([event(Self.create, "c"), event(Self.movedFrom, "a", cookie: 7)]), ["single c"])
        XCTAssertEqual(deliveries([event(Self.create, "c"), event(Self.movedFrom, "a", cookie: 7)], releasingAtEnd: true), ["single c", "alone a"])
        XCTAssertEqual(deliveries([event(Self.movedTo, "b", cookie: 7)]), ["single b"])
        var pairing = InotifyMovePairing()
        XCTAssertNil(pairing.release())
    }

    /// Events of one size queued while the loop is busy so that a rename's move-from is the last event of the
    /// first read (the hub's buffer holds a whole number of them) and its move-to the first of the next: still
    /// one `.moved` event.
    func testARenameWhoseHalvesEndOneReadAndStartTheNextIsOneMovedEvent() throws {
        let directory = NSTemporaryDirectory() + "reactiveuv-pairing-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/x", contents: nil))
        // A name of up to 15 bytes takes 16 (NUL-padded) after the 16-byte header: 32 bytes an event.
        let eventSize = 32
        let creations = InotifyHub.bufferSize / eventSize - 1
        let report = LoopHarness.run { harness in
            let watch = try harness.record(FileWatch.changes(at: directory))
            try harness.onLoop {
                for index in 0..<creations {
                    // Opened and closed, never written: one IN_CREATE each (opening and closing are not watched).
                    let file = open(directory + "/c\(index)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
                    XCTAssertGreaterThanOrEqual(file, 0)
                    close(file)
                }
                XCTAssertEqual(rename(directory + "/x", directory + "/y"), 0)
            }
            let values = try watch.waitForValues(creations + 1)
            XCTAssertEqual(values.last?.description, "moved x -> y")
            XCTAssertEqual(values.filter { $0.kind == .renamed }.count, creations, "\(values.suffix(3))")
            XCTAssertFalse(values.contains { $0.name == "x" || $0.name == "y" && $0.kind != .moved }, "\(values.suffix(3))")
        }
        XCTAssertTrue(report.isClean, "\(report.problems)")
    }
}

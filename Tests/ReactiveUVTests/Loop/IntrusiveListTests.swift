@testable import ReactiveUV
@testable import ReactiveUVCore
import XCTest

/// An element of two kinds of list at once, as a stream is in its loop's list and its listener's.
private final class Node {
    let name: String
    var firstLinks = IntrusiveLinks<Node>()
    var secondLinks = IntrusiveLinks<Node>()
    init(_ name: String) { self.name = name }
}

private enum FirstList: IntrusiveListMembership {
    static func withLinks<Result>(of element: Node, _ body: (inout IntrusiveLinks<Node>) -> Result) -> Result {
        body(&element.firstLinks)
    }
}

private enum SecondList: IntrusiveListMembership {
    static func withLinks<Result>(of element: Node, _ body: (inout IntrusiveLinks<Node>) -> Result) -> Result {
        body(&element.secondLinks)
    }
}

final class IntrusiveListTests: XCTestCase {
    private func names<M: IntrusiveListMembership>(_ list: IntrusiveList<M>) -> [String] where M.Element == Node {
        list.map(\.name)
    }

    func testInsertPutsAtTheFrontAndRemoveUnlinksFromAnywhere() {
        let (a, b, c, d) = (Node("a"), Node("b"), Node("c"), Node("d"))
        var list = IntrusiveList<FirstList>()
        for node in [a, b, c, d] { list.insert(node) }
        XCTAssertEqual(names(list), ["d", "c", "b", "a"])
        XCTAssertEqual(list.count, 4)
        list.remove(b)  // middle
        XCTAssertEqual(names(list), ["d", "c", "a"])
        list.remove(d)  // head
        XCTAssertEqual(names(list), ["c", "a"])
        XCTAssertTrue(list.first === c)
        list.remove(a)  // tail
        XCTAssertEqual(names(list), ["c"])
        list.remove(c)
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
        XCTAssertNil(list.first)
        // Removed elements carry no stale links: inserted again, they link afresh.
        list.insert(b)
        list.insert(d)
        XCTAssertEqual(names(list), ["d", "b"])
    }

    func testAnElementIsInTwoKindsOfListIndependently() {
        let (a, b, c) = (Node("a"), Node("b"), Node("c"))
        var first = IntrusiveList<FirstList>()
        var second = IntrusiveList<SecondList>()
        for node in [a, b, c] { first.insert(node) }
        for node in [c, a] { second.insert(node) }
        XCTAssertEqual(names(first), ["c", "b", "a"])
        XCTAssertEqual(names(second), ["a", "c"])
        second.remove(a)
        XCTAssertEqual(names(first), ["c", "b", "a"], "removing from one list leaves the other alone")
        XCTAssertEqual(names(second), ["c"])
    }

    func testRemoveIfPresentTellsWhetherTheElementWasInTheList() {
        let (a, b, stranger) = (Node("a"), Node("b"), Node("stranger"))
        var list = IntrusiveList<FirstList>()
        list.insert(a)
        list.insert(b)
        XCTAssertFalse(list.removeIfPresent(stranger))
        XCTAssertEqual(list.count, 2)
        XCTAssertTrue(list.removeIfPresent(a))  // the last element: linked through its previous
        XCTAssertFalse(list.removeIfPresent(a), "already removed")
        XCTAssertTrue(list.removeIfPresent(b))  // the only element: the head, with no neighbours
        XCTAssertFalse(list.removeIfPresent(b))
        XCTAssertTrue(list.isEmpty)
    }

    func testRemoveAllReturnsEveryElementAndUnlinksThem() {
        let nodes = (0..<5).map { Node("n\($0)") }
        var list = IntrusiveList<FirstList>()
        for node in nodes { list.insert(node) }
        let removed = list.removeAll()
        XCTAssertEqual(removed.map(\.name), ["n4", "n3", "n2", "n1", "n0"])
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
        for node in nodes {
            XCTAssertNil(node.firstLinks.next)
            XCTAssertNil(node.firstLinks.previous)
            XCTAssertFalse(list.removeIfPresent(node))
        }
    }

    func testTheListDoesNotRetainItsElements() {
        var node = Node("only")
        let neighbour = Node("neighbour")
        var list = IntrusiveList<FirstList>()
        list.insert(node)
        list.insert(neighbour)  // the node is now linked from its neighbour too
        XCTAssertTrue(isKnownUniquelyReferenced(&node), "neither the list nor a neighbour holds a reference")
        list.remove(node)
        list.remove(neighbour)
    }
}

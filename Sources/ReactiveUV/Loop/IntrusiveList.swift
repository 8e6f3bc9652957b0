/// An object's place in one `IntrusiveList`. Unretained: a handle is kept alive by `handle.data`,
/// a request by `req.data`, and an element leaves its list before it can die.
/// Thread rule: confined to the thread that owns the list (a loop thread).
struct IntrusiveLinks<Element: AnyObject> {
    // Unmanaged rather than `unowned(unsafe)`, whose binding to a local retains it.
    var next: Unmanaged<Element>?
    var previous: Unmanaged<Element>?

    init() {}

    init(next: Unmanaged<Element>?, previous: Unmanaged<Element>?) {
        self.next = next
        self.previous = previous
    }
}

/// Which links of its elements an `IntrusiveList` uses: an object can be in one list per
/// membership (a caseless enum per kind, so each list is specialized).
protocol IntrusiveListMembership {
    associatedtype Element: AnyObject
    /// Runs `body` on `element`'s links for this kind of list.
    static func withLinks<Result>(of element: Element, _ body: (inout IntrusiveLinks<Element>) -> Result) -> Result
}

/// A doubly linked list whose links live in its elements: O(1) insert and remove, no allocation.
///
/// It does not retain its elements: each must be removed before it dies; iterating while
/// elements are removed needs a snapshot (`Array(list)`).
/// Thread rule: confined to the thread that owns the list (a loop thread).
struct IntrusiveList<Membership: IntrusiveListMembership>: Sequence {
    typealias Element = Membership.Element

    private var head: Unmanaged<Element>?
    private(set) var count = 0

    init() {}

    var isEmpty: Bool { head == nil }

    /// The most recently inserted element.
    var first: Element? { head?.takeUnretainedValue() }

    /// Links `element` (which is in no list of this kind) at the front.
    mutating func insert(_ element: Element) {
        let added = Unmanaged.passUnretained(element)
        let oldHead = head
        Membership.withLinks(of: element) { $0 = IntrusiveLinks(next: oldHead, previous: nil) }
        oldHead?._withUnsafeGuaranteedRef { Membership.withLinks(of: $0) { $0.previous = added } }
        head = added
        count += 1
    }

    /// Unlinks `element`, which is in this list.
    mutating func remove(_ element: Element) {
        let links = Membership.withLinks(of: element) { links in
            defer { links = IntrusiveLinks() }
            return links
        }
        if let previous = links.previous {
            previous._withUnsafeGuaranteedRef { Membership.withLinks(of: $0) { $0.next = links.next } }
        } else {
            head = links.next
        }
        links.next?._withUnsafeGuaranteedRef { Membership.withLinks(of: $0) { $0.previous = links.previous } }
        count -= 1
    }

    /// Unlinks `element` if it is in this list and says whether it was (in the list: it has a
    /// previous element or is the head; the caller keeps it out of other lists of this kind).
    mutating func removeIfPresent(_ element: Element) -> Bool {
        let isLinked = Membership.withLinks(of: element) { $0.previous != nil }
        guard isLinked || head?.toOpaque() == Unmanaged.passUnretained(element).toOpaque() else { return false }
        remove(element)
        return true
    }

    /// Empties the list, unlinking every element; returns them, front to back.
    mutating func removeAll() -> [Element] {
        let elements = Array(self)
        for element in elements { Membership.withLinks(of: element) { $0 = IntrusiveLinks() } }
        head = nil
        count = 0
        return elements
    }

    /// Walks the list front to back; the list must not change meanwhile.
    struct Iterator: IteratorProtocol {
        fileprivate var cursor: Unmanaged<Element>?

        mutating func next() -> Element? {
            guard let element = cursor?.takeUnretainedValue() else { return nil }
            cursor = Membership.withLinks(of: element) { $0.next }
            return element
        }
    }

    func makeIterator() -> Iterator { Iterator(cursor: head) }

    var underestimatedCount: Int { count }
}

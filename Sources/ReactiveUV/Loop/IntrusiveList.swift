/// An object's place in one `IntrusiveList`: its neighbours, stored in the object itself.
///
/// The references are `unowned(unsafe)`: the list does not keep its elements
/// alive (a handle is kept alive by `handle.data`, a request by `req.data`),
/// and an element leaves its list before it can die.
///
/// Thread rule: confined to the thread that owns the list (a loop thread).
struct IntrusiveLinks<Element: AnyObject> {
    unowned(unsafe) var next: Element?
    unowned(unsafe) var previous: Element?

    /// Links in no list.
    init() {}
}

/// An object that can be in one `IntrusiveList` at a time.
///
/// `Linked` is the list's element type: a class hierarchy (`LoopHandle` and its
/// subclasses) shares one conformance, declared by the base class.
protocol IntrusiveListElement: AnyObject {
    associatedtype Linked: AnyObject
    /// Where this object is in its list; both links nil when it is first, last or in none.
    var listLinks: IntrusiveLinks<Linked> { get set }
}

/// A doubly linked list whose links live in its elements: O(1) insert and remove, no allocation.
///
/// The loop keeps its open handles (`LoopHandle`) and its pending requests
/// (`LoopRequest`) in one each, so shutdown can reach every one of them. The
/// list does not retain its elements: each must be removed before it dies,
/// and iterating while elements are removed needs a snapshot (`Array(list)`).
///
/// Thread rule: confined to the thread that owns the list (a loop thread).
struct IntrusiveList<Element: IntrusiveListElement>: Sequence where Element.Linked == Element {
    /// The most recently inserted element.
    private(set) unowned(unsafe) var first: Element?
    /// How many elements are in the list.
    private(set) var count = 0

    /// An empty list.
    init() {}

    var isEmpty: Bool { first == nil }

    /// Links `element` (which is in no list) at the front.
    mutating func insert(_ element: Element) {
        element.listLinks.next = first
        element.listLinks.previous = nil
        first?.listLinks.previous = element
        first = element
        count += 1
    }

    /// Unlinks `element`, which is in this list.
    mutating func remove(_ element: Element) {
        let links = element.listLinks
        if let previous = links.previous {
            previous.listLinks.next = links.next
        } else {
            first = links.next
        }
        links.next?.listLinks.previous = links.previous
        element.listLinks = IntrusiveLinks()
        count -= 1
    }

    /// Walks the list front to back; the list must not change meanwhile.
    struct Iterator: IteratorProtocol {
        fileprivate unowned(unsafe) var cursor: Element?

        mutating func next() -> Element? {
            guard let element = cursor else { return nil }
            cursor = element.listLinks.next
            return element
        }
    }

    func makeIterator() -> Iterator { Iterator(cursor: first) }

    var underestimatedCount: Int { count }
}

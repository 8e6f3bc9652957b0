/// An object's place in one `IntrusiveList`: its neighbours, stored in the object itself.
///
/// The references are unretained (`Unmanaged`): the list does not keep its elements
/// alive (a handle is kept alive by `handle.data`, a request by `req.data`),
/// and an element leaves its list before it can die.
///
/// Thread rule: confined to the thread that owns the list (a loop thread).
struct IntrusiveLinks<Element: AnyObject> {
    // Unmanaged, not `unowned(unsafe) var ...: Element?`: binding one of those to a local retains
    // it, and an insert or a remove then paid three retain/release pairs (a file request's are on
    // every stat's path).
    var next: Unmanaged<Element>?
    var previous: Unmanaged<Element>?

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
    /// The most recently inserted element (unretained, as the links).
    private var head: Unmanaged<Element>?
    /// How many elements are in the list.
    private(set) var count = 0

    /// An empty list.
    init() {}

    var isEmpty: Bool { head == nil }

    /// The most recently inserted element.
    var first: Element? { head?.takeUnretainedValue() }

    /// Links `element` (which is in no list) at the front.
    mutating func insert(_ element: Element) {
        let added = Unmanaged.passUnretained(element)
        element.listLinks.next = head
        element.listLinks.previous = nil
        head?._withUnsafeGuaranteedRef { $0.listLinks.previous = added }
        head = added
        count += 1
    }

    /// Unlinks `element`, which is in this list.
    mutating func remove(_ element: Element) {
        let links = element.listLinks
        if let previous = links.previous {
            previous._withUnsafeGuaranteedRef { $0.listLinks.next = links.next }
        } else {
            head = links.next
        }
        links.next?._withUnsafeGuaranteedRef { $0.listLinks.previous = links.previous }
        element.listLinks = IntrusiveLinks()
        count -= 1
    }

    /// Walks the list front to back; the list must not change meanwhile.
    struct Iterator: IteratorProtocol {
        fileprivate var cursor: Unmanaged<Element>?

        mutating func next() -> Element? {
            guard let element = cursor?.takeUnretainedValue() else { return nil }
            cursor = element.listLinks.next
            return element
        }
    }

    func makeIterator() -> Iterator { Iterator(cursor: head) }

    var underestimatedCount: Int { count }
}

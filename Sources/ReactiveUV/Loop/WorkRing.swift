/// A growable ring buffer of work items: push at the tail, pop at the head.
///
/// The loop thread's run queue. Unlike swapping arrays per batch, popping moves
/// one closure out and leaves nothing to destroy in bulk, so a chain of work
/// that queues one item at a time costs a push and a pop per item.
///
/// Thread rule: not thread-safe; the owner confines it to one thread.
struct WorkRing {
    typealias Work = WorkItem

    private var storage: UnsafeMutablePointer<Work>
    private var capacity: Int  // a power of two
    private var head = 0
    private(set) var count = 0

    init(capacity: Int = 64) {
        var size = 16
        while size < capacity { size <<= 1 }
        self.capacity = size
        storage = .allocate(capacity: size)
    }

    var isEmpty: Bool { count == 0 }

    mutating func push(_ work: consuming Work) {
        if count == capacity { grow() }
        (storage + ((head + count) & (capacity - 1))).initialize(to: work)
        count += 1
    }

    mutating func pop() -> Work? {
        guard count > 0 else { return nil }
        let work = (storage + head).move()
        head = (head + 1) & (capacity - 1)
        count -= 1
        return work
    }

    /// Drops every item (running none of them) and returns how many there were.
    mutating func removeAll() -> Int {
        let dropped = count
        while pop() != nil {}
        return dropped
    }

    /// Frees the storage; the ring must not be used afterwards.
    mutating func deallocate() {
        _ = removeAll()
        storage.deallocate()
    }

    private mutating func grow() {
        let newCapacity = capacity * 2
        let newStorage = UnsafeMutablePointer<Work>.allocate(capacity: newCapacity)
        for index in 0..<count {
            (newStorage + index).moveInitialize(from: storage + ((head + index) & (capacity - 1)), count: 1)
        }
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
        head = 0
    }
}

/// One queued piece of work: a closure, or a Swift concurrency job.
///
/// A concrete type, not a bare closure in a generic container: an `Array` or
/// pointer of function type stores its closures at the most general
/// abstraction, which makes Swift allocate a reabstraction thunk for every
/// closure stored, even one that captures nothing. Jobs are stored as they
/// come, so running a task or an actor on a loop allocates nothing per job.
enum WorkItem {
    case closure(@Sendable () -> Void)
    /// A job enqueued on the loop as a task executor (a task that prefers the loop).
    case taskJob(UnownedJob)
    /// A job enqueued on the loop's serial executor (an actor on the loop).
    case actorJob(UnownedJob)

    /// Runs the work (see `EventLoop.runJob` for how each kind of job runs).
    func run(on loop: EventLoop) {
        switch self {
        case .closure(let body):
            body()
        case .taskJob(let job):
            loop.runJob(job, asTaskJob: true)
        case .actorJob(let job):
            loop.runJob(job, asTaskJob: false)
        }
    }
}

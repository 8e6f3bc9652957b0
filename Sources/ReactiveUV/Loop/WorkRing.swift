/// A growable ring buffer of work items (the loop thread's run queue): popping moves one item
/// out, with nothing left to destroy in bulk.
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

    @inline(__always)
    mutating func push(_ work: consuming Work) {
        if count == capacity { grow() }
        (storage + ((head &+ count) & (capacity &- 1))).initialize(to: work)
        count &+= 1
    }

    @inline(__always)
    mutating func pop() -> Work? {
        guard count > 0 else { return nil }
        let work = (storage + head).move()
        head = (head &+ 1) & (capacity &- 1)
        count &-= 1
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

    @inline(never)
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
/// A concrete enum rather than a bare closure in a generic container, which would store each
/// closure behind a reabstraction thunk.
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

import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What drives simulated loops from a test's thread (a `Simulation`): a blocking wait made on that
/// thread (`first(timeout:)`, `waitUntilCompleted(timeout:)`) hands its wait over, since nothing
/// else would ever run the loops it waits on.
///
/// Thread rule: called on the thread that registered it, outside its loops' callbacks.
package protocol SimulationDriver: AnyObject, Sendable {
    /// Runs `start` as a callback of the driver's first loop, then runs callbacks (moving virtual
    /// time) until `isDone()`; when the wait cannot end, runs `abandon` as a callback and throws.
    ///
    /// - Throws: `TimeoutError` when `timeout` of virtual time passed first; an error naming
    ///   `operation` when nothing is left to run (the wait would never end).
    func driveBlocking(operation: String, timeout: Duration?, start: () -> Void,
                       isDone: () -> Bool, abandon: () -> Void) throws
}

/// The simulation drivers of each thread, the newest last: a blocking wait asks for its thread's.
///
/// Thread rule: safe from any thread (one mutex; a count read first keeps real programs off it).
package enum SimulationDrivers {
    private struct Entry: @unchecked Sendable {
        // Sendable: stored and read only under `table`'s mutex.
        weak var driver: (any SimulationDriver)?
        let identity: ObjectIdentifier
    }

    private static let table = Mutex<[UInt: [Entry]]>([:])
    private static let registered = Atomic<Int>(0)

    private static var threadKey: UInt { UInt(bitPattern: Int(truncatingIfNeeded: pthread_self())) }

    /// Makes `driver` the calling thread's newest driver.
    package static func register(_ driver: any SimulationDriver) {
        let key = threadKey
        table.withLock { $0[key, default: []].append(Entry(driver: driver, identity: ObjectIdentifier(driver))) }
        registered.add(1, ordering: .releasing)
    }

    /// Forgets `driver`, on whichever thread it was registered; nothing if it was not.
    package static func unregister(_ driver: any SimulationDriver) {
        let identity = ObjectIdentifier(driver)
        let removed = table.withLock { table -> Bool in
            for (key, entries) in table {
                guard let index = entries.firstIndex(where: { $0.identity == identity }) else { continue }
                var kept = entries
                kept.remove(at: index)
                table[key] = kept.isEmpty ? nil : kept
                return true
            }
            return false
        }
        if removed { registered.subtract(1, ordering: .releasing) }
    }

    /// The calling thread's newest driver still alive, or nil (always nil while none is registered).
    package static var current: (any SimulationDriver)? {
        guard registered.load(ordering: .acquiring) > 0 else { return nil }
        let key = threadKey
        return table.withLock { $0[key]?.last(where: { $0.driver != nil })?.driver }
    }
}

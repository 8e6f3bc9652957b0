import Foundation
import NIOCore
import NIOPosix
import ReactiveUV

/// An actor on a loop's serial executor.
actor LoopCountingActor {
    private let executor: UnownedSerialExecutor
    private(set) var count = 0

    init(executor: UnownedSerialExecutor) { self.executor = executor }

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor }

    func increment() { count += 1 }
}

/// The same actor on Swift's default actor executor.
actor DefaultCountingActor {
    private(set) var count = 0

    func increment() { count += 1 }
}

enum ConcurrencyScenarios {
    /// Runs an async body from synchronous code and waits for its result.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let done = CondFlag()
        let result = ResultBox<T>()
        Task {
            result.value = await body()
            done.signal()
        }
        done.wait()
        return result.value!
    }

    /// Scenario 6a: a task awaits a value produced on the loop, `count` times.
    static func hop(count: Int) -> ScenarioResult {
        let loop = ReactiveUV.EventLoop(name: "hop")
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let nioLoop = group.next()
        let ours = blocking { () -> Double in
            let begin = nanoseconds()
            var total = 0
            for index in 0..<count {
                total &+= await withCheckedContinuation { continuation in
                    loop.execute { continuation.resume(returning: index) }
                }
            }
            precondition(total != 0 || count < 2)
            return Double(nanoseconds() - begin) / 1e3 / Double(count)
        }
        let oursPreference = blocking { () -> Double in
            let begin = nanoseconds()
            var total = 0
            for index in 0..<count {
                total &+= await withTaskExecutorPreference(loop) { index }
            }
            precondition(total != 0 || count < 2)
            return Double(nanoseconds() - begin) / 1e3 / Double(count)
        }
        let nio = blocking { () -> Double in
            let begin = nanoseconds()
            var total = 0
            for index in 0..<count {
                total &+= (try? await nioLoop.submit { index }.get()) ?? 0
            }
            precondition(total != 0 || count < 2)
            return Double(nanoseconds() - begin) / 1e3 / Double(count)
        }
        loop.shutdown()
        try? group.syncShutdownGracefully()
        return ScenarioResult(
            name: "task → loop → task hop",
            workload: "\(count) times, a task on the default executor awaits a value produced on a loop thread (µs per hop)",
            unit: "µs/hop", higherIsBetter: false, target: (Contender.nio, 1.0),
            measurements: [
                Measurement(Contender.ours, ours, detail: "withCheckedContinuation + loop.execute"),
                Measurement(Contender.oursBare, oursPreference, detail: "withTaskExecutorPreference(loop)"),
                Measurement(Contender.nio, nio, detail: "eventLoop.submit { }.get()"),
            ])
    }

    /// Scenario 6b: `count` calls to an actor, on a loop executor versus the default executor.
    static func actors(count: Int) -> ScenarioResult {
        let loop = ReactiveUV.EventLoop(name: "actor")
        let onLoop = LoopCountingActor(executor: loop.asUnownedSerialExecutor())
        let onDefault = DefaultCountingActor()
        // A task isolated to the loop (`loop.task`): it shares the actor's serial executor,
        // so Swift enters the actor inline.
        let isolatedCaller = blocking { () -> Double in
            await loop.task { _ -> Double in
                let begin = nanoseconds()
                for _ in 0..<count { await onLoop.increment() }
                return Double(nanoseconds() - begin) / Double(count)
            }.value
        }
        // A task that prefers the loop, its own code nonisolated (which runs inline on the loop): the
        // actor is entered through the loop's queue, and so is the return to nonisolated code.
        let preferringCaller = blocking { () -> Double in
            await Task(executorPreference: loop) { () -> Double in
                let begin = nanoseconds()
                for _ in 0..<count { await onLoop.increment() }
                return Double(nanoseconds() - begin) / Double(count)
            }.value
        }
        let defaultCaller = blocking { () -> Double in
            let begin = nanoseconds()
            for _ in 0..<count { await onDefault.increment() }
            return Double(nanoseconds() - begin) / Double(count)
        }
        // A caller on the default executor must hop to the loop thread for each call.
        let crossing = blocking { () -> Double in
            let calls = max(1, count / 100)
            let begin = nanoseconds()
            for _ in 0..<calls { await onLoop.increment() }
            return Double(nanoseconds() - begin) / Double(calls)
        }
        loop.shutdown()
        return ScenarioResult(
            name: "actor calls",
            workload: "\(count) awaited calls to an actor method that increments a counter (ns per call)",
            unit: "ns/call", higherIsBetter: false, target: ("default executor", 1.5),
            measurements: [
                Measurement(Contender.ours, isolatedCaller, detail: "actor on a loop executor, called from a task isolated to that loop (loop.task)"),
                Measurement("default executor", defaultCaller, detail: "actor on the default executor, called from a default task"),
                Measurement("loop, preference", preferringCaller, detail: "actor on a loop executor, called from nonisolated code of a task that prefers the loop (through the loop's queue)"),
                Measurement("loop, crossing", crossing, detail: "actor on a loop executor, called from a default task (a thread hop per call)"),
            ])
    }
}

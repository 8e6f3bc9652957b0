/// Operators that gather values into arrays or split them into groups:
/// `collect(count:)` (also spelled `buffer(count:)`) and `groupBy`.
///
/// Both are fused (`lift`): state per subscription, on its home thread, no lock.
extension Signal {
    /// Sends the values in arrays of `count`; completion sends the last, shorter array if it is not empty.
    ///
    /// An error is forwarded and the unfinished array dropped. A count that is not positive ends
    /// the signal at once with a `UVError` (`EINVAL`), without subscribing to this one.
    ///
    /// RAC: none (ReactiveSwift: `collect(count:)`); Rx: `buffer(count:)`
    /// (RxJS; RxSwift: `buffer(timeSpan:count:scheduler:)`); Combine: `collect(_:)`.
    ///
    /// - Parameter count: How many values make an array; must be positive.
    /// - Returns: A signal of arrays of `count` values (the last may be shorter).
    ///
    /// Thread rule: safe from any thread.
    public func collect(count: Int) -> Signal<[Value]> {
        guard count > 0 else {
            return .invalidArgument("collect count must be positive, got \(count)", in: "Signal.collect(count:)")
        }
        return lift { downstream, _ in
            let collected = OperatorVar<[Value]>([])
            return { event in
                switch event {
                case .next(let value):
                    if collected.value.isEmpty { collected.value.reserveCapacity(Swift.min(count, 1_024)) }
                    collected.value.append(value)
                    if collected.value.count == count {
                        let full = collected.value
                        collected.value = []
                        downstream(.next(full))
                    }
                case .error(let error):
                    collected.value = []
                    downstream(.error(error))
                case .completed:
                    let rest = collected.value
                    collected.value = []
                    if !rest.isEmpty { downstream(.next(rest)) }
                    downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -collect: \(count)")
    }

    /// `collect(count:)` by Rx's name: arrays of `count` values, the last one shorter.
    ///
    /// RAC: none (ReactiveSwift: `collect(count:)`); Rx: `buffer(count:)`; Combine: `collect(_:)`.
    ///
    /// - Parameter count: How many values make an array; must be positive (else `EINVAL`).
    /// - Returns: A signal of arrays of `count` values (the last may be shorter).
    ///
    /// Thread rule: safe from any thread.
    public func buffer(count: Int) -> Signal<[Value]> {
        collect(count: count)
    }

    /// Splits the values into one signal per key, sent when its key is first seen (RAC's `-groupBy:`).
    ///
    /// - Parameter key: Gives each value's key, on the home thread.
    /// - Returns: A signal of groups; see `groupBy(_:transform:)` for when groups end.
    ///
    /// Thread rule: safe from any thread.
    public func groupBy<Key: Hashable & SendableMetatype>(_ key: @escaping @Sendable (Value) -> Key) -> Signal<GroupedSignal<Key, Value>> {
        groupBy(key, transform: { $0 })
    }

    /// Splits the values into one signal per key, each value transformed (RAC's `-groupBy:transform:`).
    ///
    /// The first value with a new key sends a new `GroupedSignal` (a subject with that `key`),
    /// then the transformed value to it, so a subscriber that subscribes to the group when it
    /// arrives gets every value of its key. This signal's completion or error reaches every
    /// group before the outer signal ends. Disposing the outer subscription completes every
    /// group, so none is left open with nothing behind it (RAC leaves them silent).
    ///
    /// RAC: `-groupBy:transform:`; Rx: `groupBy` (where groups keep the source
    /// alive after the outer subscriber left); Combine: none.
    ///
    /// - Parameters:
    ///   - key: Gives each value's key, on the home thread.
    ///   - transform: Makes the value the group sends.
    /// - Returns: A signal of groups.
    ///
    /// Thread rule: safe from any thread.
    public func groupBy<Key: Hashable & SendableMetatype, Grouped>(
        _ key: @escaping @Sendable (Value) -> Key,
        transform: @escaping @Sendable (Value) -> Grouped
    ) -> Signal<GroupedSignal<Key, Grouped>> {
        lift { downstream, subscription in
            let groups = GroupTable<Key, Grouped>()
            // Teardown ends what a terminal event did not. `groups` is shared with the observer
            // below on the home thread: boxed for the hand-over.
            let groupsAtTeardown = UncheckedSendable(groups)
            subscription.add(ActionDisposable { groupsAtTeardown.value.endAll(.completed) })
            return { event in
                switch event {
                case .next(let value):
                    let groupKey = key(value)
                    if let group = groups.table[groupKey] {
                        group.sendNext(transform(value))
                    } else {
                        let group = GroupedSignal<Key, Grouped>(key: groupKey)
                        groups.table[groupKey] = group
                        downstream(.next(group))
                        group.sendNext(transform(value))
                    }
                case .error(let error):
                    groups.endAll(.error(error))
                    downstream(.error(error))
                case .completed:
                    groups.endAll(.completed)
                    downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -groupBy:transform:")
    }
}

/// The values of one key of `groupBy`: a subject with its key (RAC's `RACGroupedSignal`).
///
/// It ends when the grouped signal ends (or its subscription is disposed). Subscribe to it when
/// it arrives to get every value of its key.
///
/// Thread rule: safe from any thread.
public final class GroupedSignal<Key: Hashable, Value>: Subject<Value>, @unchecked Sendable {
    // `key` is immutable; the rest is the subject's, guarded as `Subject` documents.
    /// The key every value of this group has.
    ///
    /// Thread rule: safe from any thread.
    public let key: Key

    /// Creates a group for `key`.
    ///
    /// - Parameter key: The group's key.
    /// - Returns: A group with no subscribers.
    ///
    /// Thread rule: safe from any thread.
    public init(key: Key) {
        self.key = key
        super.init()
    }
}

/// `groupBy`'s groups, by key.
private final class GroupTable<Key: Hashable, Value> {
    // Home thread only (teardown runs there too, or after the home closed, when nothing else runs).
    var table: [Key: GroupedSignal<Key, Value>] = [:]

    /// Ends every group with `event` and forgets them (the subjects are called after the table is emptied).
    func endAll(_ event: Event<Value>) {
        let groups = table.values
        table = [:]
        for group in groups {
            switch event {
            case .error(let error): group.sendError(error)
            case .next, .completed: group.sendCompleted()
            }
        }
    }
}

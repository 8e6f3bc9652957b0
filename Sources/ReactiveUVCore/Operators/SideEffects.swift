/// Operators that run code as events pass (`doNext`, `doError`, `doCompleted`,
/// `initially`, `finally`) and `repeat()`.
///
/// The side-effect operators are fused (`lift`); their blocks run on the home thread, before the
/// event is passed on (RAC's order).
extension Signal {
    /// Runs `action` with each value before passing it on (RAC's `-doNext:`).
    ///
    /// - Parameter action: Called with each value.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func doNext(_ action: @escaping @Sendable (Value) -> Void) -> Signal<Value> {
        lift { downstream, _ in
            { event in
                if case .next(let value) = event { action(value) }
                downstream(event)
            }
        }.debugNamed("[\(name)] -doNext:")
    }

    /// Runs `action` with the error before passing it on (RAC's `-doError:`).
    ///
    /// - Parameter action: Called with the error.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func doError(_ action: @escaping @Sendable (any Error) -> Void) -> Signal<Value> {
        lift { downstream, _ in
            { event in
                if case .error(let error) = event { action(error) }
                downstream(event)
            }
        }.debugNamed("[\(name)] -doError:")
    }

    /// Runs `action` on completion before passing it on (RAC's `-doCompleted:`).
    ///
    /// - Parameter action: Called on completion.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func doCompleted(_ action: @escaping @Sendable () -> Void) -> Signal<Value> {
        lift { downstream, _ in
            { event in
                if case .completed = event { action() }
                downstream(event)
            }
        }.debugNamed("[\(name)] -doCompleted")
    }

    /// Runs `action` each time the signal is subscribed, before the source is (RAC's `-initially:`).
    ///
    /// Adds nothing to the event path.
    ///
    /// - Parameter action: Called once per subscription, on its home thread.
    /// - Returns: The same signal, with the side effect.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func initially(_ action: @escaping @Sendable () -> Void) -> Signal<Value> {
        lift { downstream, _ in
            action()
            return downstream
        }.debugNamed("[\(name)] -initially:")
    }

    /// Runs `action` when the signal errors or completes, before passing the event on (RAC's `-finally:`).
    ///
    /// Not run when the subscription is disposed without a terminal event (as in RAC).
    ///
    /// - Parameter action: Called once on error or completion.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func finally(_ action: @escaping @Sendable () -> Void) -> Signal<Value> {
        lift { downstream, _ in
            { event in
                if event.isTerminating { action() }
                downstream(event)
            }
        }.debugNamed("[\(name)] -finally:")
    }

    /// Re-subscribes each time the signal completes, forever; an error ends it (RAC's `-repeat`).
    ///
    /// A source that completes synchronously does not grow the stack (a trampoline), but keeps
    /// the home thread busy: pair it with `take` or a trigger.
    ///
    /// Thread rule: safe from any thread.
    public func `repeat`() -> Signal<Value> {
        resubscribing(retries: 0, repeatsOnCompletion: true).debugNamed("[\(name)] -repeat")
    }
}

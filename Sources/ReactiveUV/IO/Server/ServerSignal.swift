/// The server signals (`TCPServer`, `UnixSocket`): a listener, or a group server, per subscription.
///
/// `listen` and `serve` are the same signal sending different things (`send`): the connections
/// only, or every event (`ServerEvent.sendConnection`, `.sendEvent`).
///
/// Thread rule: safe from any thread; the listener lives on its loop.
enum ServerSignal {
    /// A server on one loop: `makeSocket` makes its socket on the subscription's home loop (or `loop`).
    static func onLoop<Socket: ListeningSocket, Value>(
        _ what: String, on loop: EventLoop?, drain: Signal<TCPServer.DrainRequest>?,
        send: @escaping @Sendable (Socket.Event, Subscriber<Value>) -> Void,
        socket makeSocket: @escaping @Sendable (EventLoop) -> Socket
    ) -> Signal<Value> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: what, refusingSimulation: "Server") { loop in
                startListener(makeSocket(loop), drain: drain, send: send, subscriber)
            }
        }
    }

    /// `onLoop` for a transport with a simulated socket: on a simulated loop the listener gets
    /// `makeSimulated`'s socket instead (the choice made once, where the socket is made).
    static func onLoop<Socket: ListeningSocket, SimulatedSocket: ListeningSocket, Value>(
        _ what: String, on loop: EventLoop?, drain: Signal<TCPServer.DrainRequest>?,
        send: @escaping @Sendable (Socket.Event, Subscriber<Value>) -> Void,
        socket makeSocket: @escaping @Sendable (EventLoop) -> Socket,
        simulatedSocket makeSimulated: @escaping @Sendable (EventLoop) -> SimulatedSocket
    ) -> Signal<Value> where SimulatedSocket.Event == Socket.Event {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: what) { loop in
                loop.isSimulated
                    ? startListener(makeSimulated(loop), drain: drain, send: send, subscriber)
                    : startListener(makeSocket(loop), drain: drain, send: send, subscriber)
            }
        }
    }

    /// A listener over `socket`, following `drain`, started.
    private static func startListener<Socket: ListeningSocket, Value>(
        _ socket: Socket, drain: Signal<TCPServer.DrainRequest>?,
        send: @escaping @Sendable (Socket.Event, Subscriber<Value>) -> Void, _ subscriber: Subscriber<Value>
    ) -> Listener<Socket> {
        let listener = Listener(socket: socket, callbacks: .init(
            onEvent: { send($0, subscriber) }, onError: { subscriber.sendError($0) }, onLoopShutdown: nil))
        // Followed before the listener starts: a request sent as soon as `.listening` arrives (from
        // another thread, or from the subscriber's own callback) must find the subscription there.
        // One that comes first ends the server unbound.
        if let drain {
            listener.follow(drain, announce: { send(.draining(open: $0), subscriber) },
                            done: { subscriber.sendCompleted() })
        }
        listener.start()
        return listener
    }

    /// A server on every loop of `group`: `startShares` (the transport's) makes and starts the shares,
    /// on the group's first loop, once the loops and the options have been checked. A simulated
    /// group is refused (`family`) unless the transport's `startShares` is the simulated one (nil).
    static func onGroup<Socket: ListeningSocket, Value>(
        _ what: String, group: EventLoopGroup, options: Socket.Options, backlog: Int32?, context: String,
        onAccepted: (@Sendable (Socket.Event.Connection) -> Void)?, drain: Signal<TCPServer.DrainRequest>?,
        refusingSimulation family: StaticString? = "Server",
        send: @escaping @Sendable (Socket.Event, Subscriber<Value>) -> Void,
        startShares: @escaping @Sendable (GroupServer<Socket>) -> Void
    ) -> Signal<Value> {
        Signal { subscriber in
            LoopBinding.open(on: group.loops[0], for: subscriber, what: what, refusingSimulation: family) { _ in
                let server = GroupServer<Socket>(
                    group: group, options: options, backlog: ListenBacklog(backlog), context: context,
                    onAccepted: onAccepted, output: GroupServerOutput(subscriber, send: send))
                // Followed first, as on one loop: a request sent on `.listening` is not lost.
                if let drain { server.follow(drain) }
                server.start(startShares)
                return server
            }
        }
    }
}

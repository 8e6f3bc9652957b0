/// The TLS forms of the client and server signals, over any transport: each connection the plain
/// signal sends goes through its handshake on its own loop first.
enum TLSHandshakes {
    /// `plain`'s connection, sent once its client handshake (checking `serverName`) finished; the
    /// signal fails with the handshake's `TLSError` otherwise. `server` ("name@host:port") keys the
    /// sessions it may resume.
    static func client<Connection: StreamConnection>(_ plain: Signal<Connection>, tls: TLSClientConfiguration,
                                                     serverName: String?, server: String) -> Signal<Connection> {
        Signal { subscriber in
            plain.subscribe(
                next: { connection in
                    onLoop(of: connection) {
                        connection.startTLS(tls.context, server: false, serverName: serverName, verifiesHostname: tls.verifiesHostname,
                                            resumptionKey: server, timeout: tls.handshakeTimeout) { error in
                            if let error { subscriber.sendError(error) } else { subscriber.sendNext(connection) }
                        }
                    }
                },
                error: { subscriber.sendError($0) },
                completed: { subscriber.sendCompleted() })
        }
    }

    /// `plain`'s events, each `.accepted` held until its connection's server handshake finished
    /// (and dropped, after telling `onHandshakeFailure`, when it failed).
    static func server<Event: ServerEvent>(_ plain: Signal<Event>, tls: TLSServerConfiguration,
                                           onHandshakeFailure: (@Sendable (TLSError) -> Void)?) -> Signal<Event> {
        Signal { subscriber in
            plain.subscribe(
                next: { event in
                    guard let connection = event.acceptedConnection else { return subscriber.sendNext(event) }
                    onLoop(of: connection) {
                        connection.startTLS(tls.context, server: true, serverName: nil, verifiesHostname: false,
                                            timeout: tls.handshakeTimeout) { error in
                            if let error { onHandshakeFailure?(error) } else { subscriber.sendNext(event) }
                        }
                    }
                },
                error: { subscriber.sendError($0) },
                completed: { subscriber.sendCompleted() })
        }
    }

    /// A group server made by `plain` (given the `onAccepted` to pass on): each connection's server
    /// handshake starts on its own loop as it is accepted; once it finished, `onAccepted` runs there
    /// and `.accepted` is sent. The plain server's own `.accepted` events are left out.
    static func groupServer<Event: ServerEvent>(
        tls: TLSServerConfiguration, onAccepted: (@Sendable (Event.Connection) -> Void)?,
        onHandshakeFailure: (@Sendable (TLSError) -> Void)?,
        _ plain: @escaping @Sendable (_ onAccepted: @escaping @Sendable (Event.Connection) -> Void) -> Signal<Event>
    ) -> Signal<Event> {
        Signal { subscriber in
            let handshake: @Sendable (Event.Connection) -> Void = { connection in
                connection.startTLS(tls.context, server: true, serverName: nil, verifiesHostname: false,
                                    timeout: tls.handshakeTimeout) { error in
                    if let error { return onHandshakeFailure?(error) ?? () }
                    onAccepted?(connection)
                    subscriber.sendNext(.accepted(connection))
                }
            }
            return plain(handshake).subscribe(
                next: { event in if event.acceptedConnection == nil { subscriber.sendNext(event) } },
                error: { subscriber.sendError($0) },
                completed: { subscriber.sendCompleted() })
        }
    }

    /// Runs `work` on `connection`'s loop thread: now when already there.
    private static func onLoop(of connection: StreamConnection, _ work: @escaping @Sendable () -> Void) {
        if connection.loop.inEventLoop { work() } else { connection.loop.execute(work) }
    }
}

internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// A socket passed over a simulated IPC connection, waiting in the receiving end until the bytes
/// it came with are read: its new end, and what the connection made of it needs to know.
///
/// Thread rule: loop thread only (the receiving end's).
struct PassedEnd {
    /// The receiving end's byte count at which it came (the end of its message).
    var boundary = 0
    let end: SimulatedStreamEnd
    let transport: StreamConnection.Transport
    /// A TCP connection's addresses; a Unix connection's path.
    let local: SocketAddress?
    let peer: SocketAddress?
    let path: String
    let peerDescription: String
}

// Descriptor passing on the simulated network: the passed connection's end hands its socket over
// to a new end on the receiving loop, which takes its unread bytes and writes to the same peer;
// the old end stays as a relay for what the peer sends (the peer never learns of the move, as a
// real peer does not), and its close sends nothing. The new end travels with the message's bytes
// and waits in the receiving end until they are read; a receiving end that closes or is reset
// first closes it, and its peer reads EOF, as when the kernel drops an unread descriptor.
extension SimulatedStreamEnd {
    /// Hands this end's socket to a new end on `loop`: unread bytes and an arrived end go along.
    func handOver(to loop: EventLoop) -> SimulatedStreamEnd {
        let moved = SimulatedStreamEnd(loop: loop, latency: latency)
        moved.peer = peer
        moved.relay = self
        moved.takeUnread(from: self)
        handedTo = moved
        return moved
    }

    /// Forwards an arrival to the end this socket was handed to, on its loop.
    func relay(to moved: SimulatedStreamEnd, _ arrive: @escaping @Sendable (SimulatedStreamEnd) -> Void) {
        let box = UncheckedSendable(moved)
        SimulatedStreamEnd.message(from: loop, to: moved.loop, after: .zero) { arrive(box.value) }
    }

    /// Sends `message` with `passed` (an end handed over), in order with this end's writes.
    func transmit(_ message: [UInt8], passing passed: PassedEnd) {
        if !backlog.isEmpty { return passesAfterBacklog.append((message, passed)) }
        let box = UncheckedSendable(passed)
        send { $0.receive(message, passing: box.value) }
    }

    private func receive(_ message: [UInt8], passing passed: PassedEnd) {
        guard !isClosed, handedTo == nil else { return passed.end.abandon(reset: false) }
        var arrived = passed
        arrived.boundary = bytesReceived + message.count
        passedIn.append(arrived)
        receive(message[...])
    }

    /// The passed ends whose bytes were all read, oldest first, taken out.
    func takeReadyPassedEnds() -> [PassedEnd] {
        let ready = passedIn.prefix { $0.boundary <= bytesRead }
        passedIn.removeFirst(ready.count)
        return Array(ready)
    }

    /// Puts back passed ends a reader could not take (it stopped meanwhile).
    func putBack(_ ends: ArraySlice<PassedEnd>) {
        passedIn.insert(contentsOf: ends, at: 0)
    }

    /// Closes every passed end not taken: their peers read EOF.
    func closePassedIn() {
        let ends = passedIn
        passedIn = []
        for passed in ends { passed.end.abandon(reset: false) }
    }
}

extension StreamConnection {
    /// `sendOnLoop(_:passing:keepOpen:completion:)` on a simulated IPC connection (checked already):
    /// the message goes out now with the passed connection's socket, which this side closes.
    func sendSimulated(_ message: [UInt8], passing passed: StreamConnection, keepOpen: Bool,
                       completion: @escaping ((any Error)?) -> Void) {
        let context = "UnixConnection.send(_:with:) over \(peerDescription)"
        guard !keepOpen else {
            return completion(UVError(code: UV_ENOTSUP.rawValue,
                                      message: "keepOpen (both sides holding the socket) is not simulated: pass it without keepOpen",
                                      context: context))
        }
        guard let channel = extrasIfMade?.simulated, let end = passed.extrasIfMade?.simulated,
              passed.transport == .tcp || (passed.transport == .pipe && !passed.ipc) else {
            return completion(UVError(code: UVError.invalidArgumentCode,
                                      message: "only a simulated TCP or Unix connection (not an IPC one) can be passed on the simulated network",
                                      context: context))
        }
        let tcp = passed.transport == .tcp ? unsafeDowncast(passed, to: TCPConnection.self) : nil
        let moved = end.handOver(to: channel.peer?.loop ?? loop)
        let handed = PassedEnd(end: moved, transport: passed.transport, local: tcp?.localAddress, peer: tcp?.peerAddress,
                               path: (passed as? UnixConnection)?.path ?? "", peerDescription: passed.peerDescription)
        channel.transmit(message, passing: handed)
        // Handed over: nothing more is read or written here (its reader completes).
        passed.end(.closed)
        let finished = UncheckedSendable(completion)
        loop.execute { [self] in
            noteActivityIfTracked()
            finished.value(nil)
        }
    }

    /// `deliverPendingDescriptors` for a simulated IPC connection: each passed socket whose bytes
    /// were read becomes a connection for the receiver, while a reader reads.
    func deliverSimulatedDescriptors() {
        guard let channel = extrasIfMade?.simulated else { return }
        var ready = channel.takeReadyPassedEnds()[...]
        while let passed = ready.first {
            guard isHandleOpen, isReading else { return channel.putBack(ready) }
            guard let receiver = descriptorReceiver else {
                channel.putBack(ready)
                return endReader(UVError(code: UV_EPROTO.rawValue,
                                         message: "the peer passed a connection, which `bytes` cannot deliver: read an IPC connection with `incoming` (it stays queued for it)",
                                         context: "UnixConnection.bytes of \(peerDescription)"))
            }
            ready.removeFirst()
            let origin = StreamOrigin("passed over the IPC connection \(peerDescription) (simulated)", limits: limits)
            let accepted: StreamConnection
            if passed.transport == .tcp {
                let tcp = TCPConnection(loop: loop, transport: .tcp, limits: limits, originLabel: origin)
                tcp.openSimulated(passed.end)
                if let local = passed.local, let peer = passed.peer { tcp.keepSimulatedAddresses(local: local, peer: peer) }
                accepted = tcp
            } else {
                let unix = UnixConnection(loop: loop, limits: limits, originLabel: origin, ipc: false, path: passed.path)
                unix.openSimulated(passed.end)
                accepted = unix
            }
            accepted.peerDescription = passed.peerDescription
            receiver.channel(self, didReceive: accepted)
        }
        channel.queueReadIfReady()
    }
}

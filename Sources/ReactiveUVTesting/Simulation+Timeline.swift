import ReactiveUV

/// One read a simulated stream was handed: when, on which loop (the receiving host), from which
/// peer, and what: bytes, or the end (the peer's FIN, or a reset).
///
/// Thread rule: a value; safe from any thread.
public struct SimulationDelivery: Sendable, Equatable, CustomStringConvertible {
    /// What a read held.
    ///
    /// Thread rule: a value; safe from any thread.
    public enum Content: Sendable, Equatable {
        /// Bytes, as the stream's reader got them (a short read is its own delivery).
        case bytes([UInt8])
        /// The peer's FIN.
        case endOfFile
        /// The connection was reset (`ECONNRESET`).
        case reset
        /// Any other error status the read carried.
        case error(Int32)
    }

    /// The virtual time of the read.
    public let time: SchedulerInstant
    /// The name of the loop whose stream read it.
    public let loopName: String
    /// The reading stream's peer, as the stream describes it (`"127.0.0.1:8080"`, a socket path).
    public let peer: String
    /// What it read.
    public let content: Content

    /// `"12.000 ms  loop 'server' from 127.0.0.1:49152: 5 bytes"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        let micros = time.nanoseconds / 1_000
        let millis = "\(micros / 1_000).\(String(micros % 1_000 + 1_000).dropFirst())"
        let what = switch content {
        case .bytes(let bytes): "\(bytes.count) bytes"
        case .endOfFile: "end of file"
        case .reset: "reset"
        case .error(let code): "error \(code)"
        }
        return "\(millis) ms  loop '\(loopName)' from \(peer): \(what)"
    }
}

extension Simulation {
    /// Whether the simulation keeps what its streams read, in order (`timeline`). Off by default:
    /// it holds every byte read. Turn it on before the traffic to assert on.
    ///
    /// Thread rule: the driving thread.
    public var recordsTimeline: Bool {
        get { network.streamReadObserver != nil }
        set {
            guard newValue != recordsTimeline else { return }
            network.streamReadObserver = newValue ? { [unowned self] loop, peer, bytes, status in
                record(loop: loop, peer: peer, bytes: bytes, status: status)
            } : nil
        }
    }

    /// Every read of a simulated stream since `recordsTimeline` was turned on: what each peer
    /// received and when, in the order the loops read it.
    ///
    /// Thread rule: the driving thread.
    public var timeline: [SimulationDelivery] { timelineDeliveries }

    /// The bytes the streams of `loop` read (from `peer` only, when given), in order.
    ///
    /// Thread rule: the driving thread.
    public func bytesReceived(on loop: EventLoop, from peer: String? = nil) -> [UInt8] {
        timelineDeliveries.reduce(into: []) { bytes, delivery in
            guard delivery.loopName == loop.name, peer == nil || delivery.peer == peer,
                  case .bytes(let read) = delivery.content else { return }
            bytes += read
        }
    }

    private func record(loop: String, peer: String, bytes: UnsafeRawBufferPointer, status: Int32) {
        let content: SimulationDelivery.Content
        if bytes.count > 0 {
            content = .bytes(Array(bytes))
        } else if status == UVError.connectionReset.code {
            content = .reset
        } else if status == UVError.endOfFile.code {
            content = .endOfFile
        } else {
            content = .error(status)
        }
        timelineDeliveries.append(SimulationDelivery(time: now, loopName: loop, peer: peer, content: content))
    }
}

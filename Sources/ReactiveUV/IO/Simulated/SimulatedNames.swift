internal import CLibUV
@_spi(SchedulerImplementation) import ReactiveUVCore

/// The simulated network's host table and its DNS faults: what `DNS.resolve`, `TCP.connect`,
/// `UDP.bind` and a server's host name resolve through on a simulated loop.
///
/// A name (case-insensitive, as DNS is) maps to numeric addresses; `localhost` is there from the
/// start. An unknown name fails with `EAI_NONAME`, as `getaddrinfo` does; a name inside a planned
/// failure window, or a lookup drawn to fail, fails with `EAI_AGAIN` (no DNS server answered).
///
/// Thread rule: the simulation's driving thread (its loops' callbacks).
package struct SimulatedNames: Sendable {
    /// Addresses by lower-cased name, in the order a lookup returns them.
    package private(set) var hosts: [String: [String]] = ["localhost": ["127.0.0.1", "::1"]]
    /// Planned failures: lookups of `host` started from `start` through `end` (virtual nanoseconds) fail.
    private var failures: [(host: String, start: UInt64, end: UInt64)] = []
    /// Drawn failures that struck: the name and when (virtual nanoseconds).
    package private(set) var drawnFailures: [(host: String, at: UInt64)] = []

    package init() {}

    /// Maps `name` to `addresses` (numeric, checked by the caller), replacing what it had.
    package mutating func set(_ name: String, to addresses: [String]) {
        hosts[name.lowercased()] = addresses
    }

    /// Makes lookups of `host` started from `start` through `end` fail with `EAI_AGAIN`.
    package mutating func fail(_ host: String, from start: UInt64, through end: UInt64) {
        failures.append((host.lowercased(), start, end))
    }

    /// The addresses of `host` with `port`, or the error a real lookup gives; `failurePerMille`
    /// lookups in a thousand fail, drawn by `draw` (the seed's numbers), unless `armsDraws` is
    /// false (under a written plan).
    mutating func lookUp(_ host: String, port: Int, at now: UInt64, failurePerMille: Int, draw: (UInt64) -> UInt64,
                         armsDraws: Bool) -> Result<[SocketAddress], UVError> {
        let name = host.lowercased()
        var failing = failures.contains { $0.host == name && $0.start <= now && now <= $0.end }
        if failurePerMille > 0, draw(1_000) < UInt64(failurePerMille), armsDraws, !failing {
            drawnFailures.append((name, now))
            failing = true
        }
        if failing {
            return .failure(UVError(code: UV_EAI_AGAIN.rawValue, message: "the simulated DNS did not answer (a DNS failure fault)",
                                    context: "resolving '\(host)'"))
        }
        guard let numeric = hosts[name] else {
            return .failure(UVError(code: UV_EAI_NONAME.rawValue, context: "resolving '\(host)'"))
        }
        return .success(numeric.compactMap { try? SocketAddress(host: $0, port: port) })
    }
}

extension SimulatedNetwork {
    /// A lookup on the simulated network: `completion` runs on `loop` a round trip later (a timer
    /// of the loop, traced), with the addresses or the error. The timer is the pending lookup.
    func resolve(_ host: String, port: Int, on loop: EventLoop,
                 _ completion: @escaping (Result<[SocketAddress], any Error>) -> Void) -> (any Disposable)? {
        let result = lookUp(host, port: port, on: loop)
        let box = UncheckedSendable(completion)
        // The answer is digested into the trace as a read is: a changed host table changes the hash.
        let (text, status): (String, Int32) = switch result {
        case .success(let addresses): (addresses.map(\.description).joined(separator: " "), 0)
        case .failure(let error): ("", error.code)
        }
        let answer = loop.schedule(after: faults.latency * 2) { [self] in
            Array(text.utf8).withUnsafeBytes { noteRead($0, status: status) }
            box.value(result.mapError { $0 as any Error })
        }
        if answer == nil { completion(.failure(EventLoopError.shutDown(loop: loop.name))) }
        return answer
    }

    /// The host table's answer for `host` now, drawing a DNS failure from the seed.
    private func lookUp(_ host: String, port: Int, on loop: EventLoop) -> Result<[SocketAddress], UVError> {
        names.lookUp(host, port: port, at: loop.now.nanoseconds, failurePerMille: faults.dnsFailurePerMille,
                     draw: { bound in random() % bound }, armsDraws: drawsResets)
    }

    /// The first address of `host` for a server's bind, resolved at once; the lookup's error otherwise.
    func resolveForBind(_ host: String, port: Int, on loop: EventLoop) -> Result<SocketAddress, UVError> {
        if let numeric = try? SocketAddress(host: host, port: port) { return .success(numeric) }
        return lookUp(host, port: port, on: loop).flatMap { addresses in
            guard let first = addresses.first else {
                return .failure(UVError(code: UV_EAI_NODATA.rawValue, context: "resolving '\(host)'"))
            }
            return .success(first)
        }
    }
}

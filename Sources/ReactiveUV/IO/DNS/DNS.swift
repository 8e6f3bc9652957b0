internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Host name resolution on libuv's thread pool (`uv_getaddrinfo`).
///
/// Thread rule: safe from any thread.
public enum DNS {
    /// Resolves `host` to its addresses, then completes.
    ///
    /// Numeric hosts are answered without a lookup. A name that does not resolve fails with a
    /// `UVError` such as `EAI_NONAME`; disposing before the answer cancels a lookup not yet started.
    /// On a simulated loop the simulation's host table answers, a round trip of virtual time later.
    ///
    /// - Parameters:
    ///   - host: A host name or numeric address.
    ///   - port: The port to put in every address (0...65535).
    ///   - loop: The loop that runs the lookup; nil for the subscription's home loop.
    /// - Returns: A signal of one array (IPv4 and IPv6 addresses in the resolver's order), then completion.
    ///
    /// Thread rule: safe from any thread.
    public static func resolve(_ host: String, port: Int = 0, on loop: EventLoop? = nil) -> Signal<[SocketAddress]> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "DNS.resolve") { loop in
                HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: loop) { result in
                    switch result {
                    case .success(let addresses):
                        subscriber.sendNext(addresses)
                        subscriber.sendCompleted()
                    case .failure(let error):
                        subscriber.sendError(error)
                    }
                }
            }
        }.debugNamed("+DNS.resolve(\(host))")
    }
}

/// `SOCK_STREAM` and `SOCK_DGRAM` as plain integers (Glibc imports them as an enum).
let SOCK_STREAM_VALUE = Int32(SOCK_STREAM.rawValue)
let SOCK_DGRAM_VALUE = Int32(SOCK_DGRAM.rawValue)

/// Turns a host into addresses: at once for a numeric host, through `uv_getaddrinfo` otherwise.
enum HostResolution {
    /// Calls `completion` (on the loop thread) with the addresses of `host`; returns the pending
    /// lookup (dispose it to cancel), or nil when `completion` was already called.
    @discardableResult
    static func resolve(
        _ host: String,
        port: Int,
        socketType: Int32,
        on loop: EventLoop,
        _ completion: @escaping (Result<[SocketAddress], any Error>) -> Void
    ) -> (any Disposable)? {
        loop.assertInEventLoop("HostResolution.resolve(\(host))")
        guard (0...65_535).contains(port) else {
            completion(.failure(UVError(code: UVError.invalidArgumentCode, message: "port must be in 0...65535, got \(port)",
                                        context: "resolving \(host)")))
            return nil
        }
        // getaddrinfo answers an empty host with a bare EINVAL naming nothing.
        guard !host.isEmpty else {
            completion(.failure(UVError(code: UVError.invalidArgumentCode,
                                        message: "the host is empty: give an address (\"127.0.0.1\", \"::\") or a host name",
                                        context: "resolving the host for port \(port)")))
            return nil
        }
        if let address = try? SocketAddress(host: host, port: port) {
            completion(.success([address]))
            return nil
        }
        guard loop.acceptsNewRequests else {
            completion(.failure(EventLoopError.shutDown(loop: loop.name)))
            return nil
        }
        // A simulated loop resolves through its network's host table; libuv's pool would never answer it.
        if loop.isSimulated {
            guard let network = loop.simulatedNetwork else {
                completion(.failure(loop.simulationRefusal("DNS", what: "resolving \(host)")))
                return nil
            }
            return network.resolve(host, port: port, on: loop, completion)
        }
        let lookup = AddressLookup(loop: loop, host: host, port: port, completion: completion)
        do {
            try lookup.start(socketType: socketType)
        } catch {
            completion(.failure(error))
            return nil
        }
        return lookup
    }
}

/// One `uv_getaddrinfo` request: the DNS family's backend seam (a second backend answers
/// `start(socketType:)` with its own hosts).
/// Thread rule: loop thread only, except `dispose()`.
final class AddressLookup: LoopRequest, LoopDisposable, @unchecked Sendable {
    // Sendable: `completion` is loop thread only (`dispose()` hops there); `disposedFlag` is atomic; the rest is immutable.
    private let host: String
    private let port: Int
    private var completion: ((Result<[SocketAddress], any Error>) -> Void)?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, host: String, port: Int, completion: @escaping (Result<[SocketAddress], any Error>) -> Void) {
        self.host = host
        self.port = port
        self.completion = completion
        super.init(loop: loop, type: UV_GETADDRINFO)
    }

    override var label: String { "getaddrinfo \(host)" }

    func start(socketType: Int32) throws(UVError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = socketType
        let request = pointer(as: uv_getaddrinfo_t.self)
        try start("uv_getaddrinfo(\(host))") {
            uv_getaddrinfo(loop.uvLoop, request, addressLookupCallback, host, nil, &hints)
        }
    }

    fileprivate func finish(status: Int32, result: UnsafeMutablePointer<addrinfo>?) {
        didFinish()
        defer { uv_freeaddrinfo(result) }
        guard let completion else { return }
        self.completion = nil
        if status < 0 {
            completion(.failure(UVError(code: status, context: "resolving '\(host)'")))
            return
        }
        var addresses: [SocketAddress] = []
        var cursor = result
        while let entry = cursor {
            if let address = entry.pointee.ai_addr.flatMap({ SocketAddress(UnsafePointer($0)) }),
               let withPort = try? SocketAddress(host: address.host, port: port),
               !addresses.contains(withPort) {
                addresses.append(withPort)
            }
            cursor = entry.pointee.ai_next
        }
        if addresses.isEmpty {
            completion(.failure(UVError(code: UV_EAI_NODATA.rawValue, message: "'\(host)' has no IPv4 or IPv6 address",
                                        context: "resolving '\(host)'")))
        } else {
            completion(.success(addresses))
        }
    }

    override func cancelForShutdown() {
        let completion = self.completion
        self.completion = nil
        cancel()
        completion?(.failure(EventLoopError.shutDown(loop: loop.name)))
    }

    func abandon() {
        completion = nil
        cancel()
    }
}

private let addressLookupCallback: uv_getaddrinfo_cb = { request, status, result in
    guard let data = request?.pointee.data else { return }
    Unmanaged<AddressLookup>.fromOpaque(data).takeRetainedValue().finish(status: status, result: result)
}

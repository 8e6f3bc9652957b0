internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Standard input, output and error as a byte signal and two writers, whatever they are connected to.
///
/// - `input(on:)` reads descriptor 0 as chunks: terminals, pipes and sockets on the loop, files
///   and devices on the thread pool from the current offset. It completes at end of input.
/// - `output` and `error` are `StandardWriter`s: writes queue on the loop and report their end; a
///   reader that went away is an `EPIPE` on the write, never a `SIGPIPE` death (`SIGPIPE` is
///   ignored process-wide from the first ReactiveUV stream).
///
/// Errors on the signal, never a crash: a descriptor not open (`EBADF`), a directory (`EISDIR`),
/// a datagram or other unusable socket (`ENOTSUP`). Descriptors 0, 1 and 2 are never closed, and
/// their original flags come back when the last handle on their open file description closes.
///
/// Thread rule: safe from any thread.
public enum StandardIO {
    /// What a descriptor is connected to, as far as reading and writing it is concerned.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// A terminal (`isatty`): read and written through a libuv TTY stream.
        case terminal
        /// A pipe or FIFO, or a Unix-domain stream socket: read and written on the loop.
        case pipe
        /// A TCP socket (a program started by inetd or systemd socket activation).
        case tcp
        /// A regular file or a device (`/dev/null`): read on the thread pool, written synchronously.
        case file

        /// `"terminal"`, `"pipe"`, `"tcp socket"`, `"file"`.
        ///
        /// Thread rule: safe from any thread.
        public var description: String {
            switch self {
            case .terminal: "terminal"
            case .pipe: "pipe"
            case .tcp: "tcp socket"
            case .file: "file"
            }
        }
    }

    /// What `descriptor` is connected to, or why it cannot be used as a stream: `EBADF` when it is
    /// not open, `EISDIR` for a directory, `ENOTSUP` for a datagram socket or anything else.
    ///
    /// Thread rule: safe from any thread.
    public static func kind(of descriptor: Int32) -> Result<Kind, UVError> {
        kind(of: descriptor, name: "descriptor \(descriptor)")
    }

    /// `kind(of:)` with the descriptor's name for messages ("standard input").
    static func kind(of descriptor: Int32, name: String) -> Result<Kind, UVError> {
        StandardDescriptors.kind(of: descriptor, name: name)
    }

    /// Standard input as a signal of chunks (at most 64 KiB each), completing at its end.
    ///
    /// Disposing stops reading; unread bytes stay for a later subscriber. One subscriber at a time
    /// (a second gets `EBUSY`). A terminal is read in its mode (line by line unless
    /// `TTY.setMode(.raw)`). Fails with `EBADF`, `EISDIR`, `ENOTSUP` (see `kind(of:)`) or the read's error.
    /// On a simulated loop it reads the simulation's scripted input (`Simulation.writeStandardInput`).
    ///
    /// - Parameter loop: The loop that reads; nil for the subscription's home loop.
    ///
    /// Thread rule: safe from any thread.
    public static func input(on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        input(descriptor: 0, name: "standard input", on: loop)
    }

    /// `input(on:)` for any descriptor; one above 2 belongs to the signal (libuv closes it with its handle).
    static func input(descriptor: Int32, name: String, on loop: EventLoop?) -> Signal<[UInt8]> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "StandardIO.input") { loop in
                if let system = loop.simulatedSystem {
                    guard descriptor == 0 else {
                        subscriber.sendError(loop.simulationRefusal("StandardIO", what: "reading descriptor \(descriptor)"))
                        return nil
                    }
                    return SimulatedStandardInput.open(system: system, loop: loop, subscriber: subscriber)
                }
                let kind: Kind
                switch StandardIO.kind(of: descriptor, name: name) {
                case .success(let found): kind = found
                case .failure(let error):
                    subscriber.sendError(error)
                    return nil
                }
                guard let transport = kind.transport else {
                    return readFile(descriptor: descriptor, name: name, on: loop, subscriber)
                }
                guard DescriptorClaims.claim(descriptor) else {
                    subscriber.sendError(UVError(code: UV_EBUSY.rawValue,
                                                 message: "\(name) already has a reader: it is read by one subscriber at a time",
                                                 context: "StandardIO.input"))
                    return nil
                }
                let stream: StreamConnection, owner: StandardStreamOwner
                do {
                    (stream, owner) = try StandardStreamOwner.openStream(
                        on: descriptor, transport: transport, limits: StreamBufferLimits(), name: name,
                        origin: "from StandardIO.input", loop: loop)
                } catch {
                    subscriber.sendError(error)
                    return nil
                }
                guard let reading = stream.startReading(subscriber) else {
                    stream.end(.closed)
                    return nil
                }
                return StandardInputReader(stream: stream, reading: reading, owner: owner)
            }
        }.debugNamed("+StandardIO.input(\(name))")
    }

    /// A file or device on `descriptor`: read on the pool through a duplicate (the transfer closes the duplicate).
    private static func readFile(descriptor: Int32, name: String, on loop: EventLoop,
                                 _ subscriber: Subscriber<[UInt8]>) -> (any Disposable)? {
        let duplicate: Int32
        switch StandardDescriptors.duplicate(descriptor, name: name) {
        case .success(let made): duplicate = made
        case .failure(let error):
            subscriber.sendError(error)
            return nil
        }
        return Files.readChunks(of: duplicate, name: name, chunkSize: ReadBuffer.size, on: loop, into: subscriber)
    }
}

extension StandardIO.Kind {
    /// The libuv stream that reads and writes this kind; nil for files (no stream can).
    var transport: StreamConnection.Transport? {
        switch self {
        case .terminal: .tty
        case .pipe: .pipe
        case .tcp: .tcp
        case .file: nil
        }
    }
}

/// Descriptors with an open libuv stream in this process: one each, or two handles would share
/// libuv's epoll registration.
enum DescriptorClaims {
    private static let claimed = LockedValue<Set<Int32>>([])

    /// Claims `descriptor`; false when it is already claimed.
    static func claim(_ descriptor: Int32) -> Bool {
        claimed.withLock { $0.insert(descriptor).inserted }
    }

    static func release(_ descriptor: Int32) {
        _ = claimed.withLock { $0.remove(descriptor) }
    }
}

/// Owns a standard descriptor's stream while open: counts it in `SharedDescriptions` and gives
/// the descriptor back (the count and the claim) when the stream ends.
/// Thread rule: loop thread of the stream (created there, told there).
final class StandardStreamOwner: StreamConnectionOwner, @unchecked Sendable {
    // Sendable: `descriptor` is immutable; `released` and `onEnd` are touched on the stream's loop thread only.
    let descriptor: Int32
    private var released = false
    /// Told once the stream ended, with why.
    var onEnd: ((StreamConnection.EndReason) -> Void)?

    init(descriptor: Int32) {
        self.descriptor = descriptor
        SharedDescriptions.streamWillOpen(on: descriptor)
    }

    /// A stream on a claimed `descriptor` with a new owner, which gives the descriptor back when the
    /// stream ends, or here when it cannot be opened.
    static func openStream(on descriptor: Int32, transport: StreamConnection.Transport, limits: StreamBufferLimits,
                           name: String, origin: String, loop: EventLoop) throws(UVError) -> (StreamConnection, StandardStreamOwner) {
        let owner = StandardStreamOwner(descriptor: descriptor)
        let stream = StreamConnection(loop: loop, transport: transport, limits: limits, origin: origin)
        stream.peerDescription = name
        stream.owner = owner
        do {
            try stream.open(descriptor: descriptor)
        } catch {
            owner.release()
            throw error
        }
        return (stream, owner)
    }

    func streamDidEnd(_ stream: StreamConnection, reason: StreamConnection.EndReason) {
        release()
        let onEnd = self.onEnd
        self.onEnd = nil
        onEnd?(reason)
    }

    /// Uncounts the stream and frees the claim. Idempotent.
    func release() {
        guard !released else { return }
        released = true
        SharedDescriptions.streamDidClose(on: descriptor)
        DescriptorClaims.release(descriptor)
    }
}

/// The disposable of one `StandardIO.input` subscription on a stream: stops reading and closes the handle.
final class StandardInputReader: LoopDisposable, @unchecked Sendable {
    // Sendable: immutable; the stream is touched on its loop thread only (`abandon` runs there).
    private let stream: StreamConnection
    private let reading: any Disposable
    /// Kept alive with the subscription: the stream only holds it weakly.
    private let owner: StandardStreamOwner
    let disposedFlag = Atomic<Bool>(false)

    init(stream: StreamConnection, reading: any Disposable, owner: StandardStreamOwner) {
        self.stream = stream
        self.reading = reading
        self.owner = owner
    }

    var loop: EventLoop { stream.loop }

    func abandon() {
        reading.dispose()
        stream.end(.closed)
        owner.release()
    }
}

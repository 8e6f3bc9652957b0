internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Standard input, output and error as a byte signal and two writers, whatever they are connected to.
///
/// - `input(on:)` reads descriptor 0 as a signal of chunks, whether it is a
///   terminal, a pipe, a socket, a regular file or a device: terminals, pipes
///   and sockets are read on the loop (epoll, through a libuv stream), files
///   and devices (`< data.txt`, `< /dev/null`) on the thread pool from the
///   current offset. It completes at end of input (end of file, the writer
///   closing the pipe, Ctrl-D on a terminal).
/// - `output` and `error` are `StandardWriter`s: writes queue on the loop,
///   flow out as the reader takes them, and report their end; a reader that
///   went away is an `EPIPE` on the write, never a `SIGPIPE` death.
///
/// Bad input answered with an error on the signal (never a crash): a
/// descriptor that is not open (`EBADF`, e.g. a program started with `<&-`),
/// a directory (`EISDIR`), a datagram or other unusable socket (`ENOTSUP`).
///
/// Descriptors 0, 1 and 2 are never closed: disposing closes only the libuv
/// handle. libuv makes a pipe or socket non-blocking in place (a terminal it
/// reopens first, so the shell's descriptor is left alone); the original flags
/// are put back when the last of these handles on the same open file
/// description closes (standard input and output are often one socket or
/// terminal: inetd, socket activation, `prog <&3 >&3`, `2>&1`), so a writer
/// still open never turns blocking under the loop, and code that reads or
/// writes the descriptor directly afterwards (and a shell sharing a pipe) sees
/// it as before.
///
/// `SIGPIPE` is ignored for the whole process from the first use of any
/// ReactiveUV stream (as libuv's users must: libuv does not do it), so a
/// write to a pipe whose reader has gone fails with `EPIPE` instead.
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

    /// What `descriptor` is connected to, or why it cannot be used as a stream.
    ///
    /// - Parameter descriptor: The descriptor (0, 1, 2, or any other open one).
    /// - Returns: Its kind, or the error: `EBADF` when it is not open, `EISDIR` for a
    ///   directory, `ENOTSUP` for a datagram socket or anything else that is not a byte stream.
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
    /// Subscribing starts reading; disposing stops it (descriptor 0 stays
    /// open, and its unread bytes stay in the pipe or terminal for a later
    /// subscriber). One subscriber reads at a time: a second one while the
    /// first is reading gets `EBUSY` (two libuv handles cannot watch one
    /// descriptor). A terminal is read in whatever mode it is in (line by
    /// line unless `TTY.setMode(.raw)`); Ctrl-D at the start of a line ends it.
    ///
    /// Fails with `EBADF` when descriptor 0 is not open, `EISDIR` when it is a
    /// directory, `ENOTSUP` for a datagram socket, or the read's error.
    /// Chunks come on the subscriber's home loop, like every I/O signal.
    ///
    /// - Parameter loop: The loop that reads; nil for the subscription's home loop.
    /// - Returns: A signal of chunks.
    ///
    /// Thread rule: safe from any thread.
    public static func input(on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        input(descriptor: 0, name: "standard input", on: loop)
    }

    /// `input(on:)` for any descriptor (tests pass one end of a pipe or a pseudo-terminal).
    ///
    /// libuv closes a descriptor above 2 with its handle: such a descriptor belongs to the signal.
    static func input(descriptor: Int32, name: String, on loop: EventLoop?) -> Signal<[UInt8]> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "StandardIO.input") { loop in
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

/// The descriptors that have an open libuv stream in this process: one each, or libuv's epoll
/// registration for the descriptor would be shared by two handles.
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

/// Owns a standard descriptor's stream while it is open: counts it as a user of the descriptor's
/// open file description (whose flags libuv makes non-blocking: `SharedDescriptions`), and gives
/// the descriptor back (the count and the claim) when the stream ends.
///
/// Thread rule: loop thread of the stream (created there, told there).
final class StandardStreamOwner: StreamConnectionOwner, @unchecked Sendable {
    // `descriptor` is immutable; `released` and `onEnd` are only touched on the stream's loop thread.
    let descriptor: Int32
    private var released = false
    /// Told (on the loop thread) once the stream ended, with why.
    var onEnd: ((StreamConnection.EndReason) -> Void)?

    init(descriptor: Int32) {
        self.descriptor = descriptor
        SharedDescriptions.streamWillOpen(on: descriptor)
    }

    /// A stream on `descriptor` (already claimed in `DescriptorClaims`) owned by a new owner,
    /// which puts the descriptor's flags back and frees the claim when the stream ends, or
    /// here when it cannot be opened.
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

    /// Uncounts the stream (the last one on the description puts its flags back: libuv set
    /// `O_NONBLOCK`) and frees the claim. Idempotent.
    func release() {
        guard !released else { return }
        released = true
        SharedDescriptions.streamDidClose(on: descriptor)
        DescriptorClaims.release(descriptor)
    }
}

/// The disposable of one `StandardIO.input` subscription on a stream: stops reading and closes the handle.
final class StandardInputReader: LoopDisposable, @unchecked Sendable {
    // Immutable; the stream is touched on its loop thread only (`abandon` runs there).
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

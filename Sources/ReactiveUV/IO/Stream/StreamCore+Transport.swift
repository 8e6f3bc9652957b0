internal import CLibUV

// The stream core's two small vocabularies, kept beside `StreamCore.swift` (which holds the core's
// state and its read, write and close paths): what kind of libuv stream a handle is, and why it ended.
extension StreamConnection {
    /// Which libuv stream type the handle is.
    enum Transport: UInt8 {
        /// A `uv_tcp_t`.
        case tcp
        /// A `uv_pipe_t` (a Unix-domain socket, or a pipe or socket opened by descriptor).
        case pipe
        /// A `uv_pipe_t` connected to a child process's standard input, output or error.
        case childPipe
        /// A `uv_tty_t` (a terminal, opened by descriptor with `open(descriptor:)`).
        case tty
        /// A `uv_pipe_t` opened on a FIFO's read end (`Files.read`, `Files.chunks`; see `FIFOStream`).
        case fifo

        /// The public type that wraps it, for messages.
        var connectionTypeName: String {
            switch self {
            case .tcp: "TCPConnection"
            case .pipe: "UnixConnection"
            case .childPipe: "ChildPipe"
            case .tty: "StandardIO"
            case .fifo: "Files"
            }
        }

        /// libuv's handle type, for the handle's size.
        var handleType: uv_handle_type {
            switch self {
            case .tcp: UV_TCP
            case .pipe, .childPipe, .fifo: UV_NAMED_PIPE
            case .tty: UV_TTY
            }
        }
    }

    /// Why a stream ended.
    enum EndReason {
        /// Closed on purpose (`close()`, `reset()`, the owner's disposal).
        case closed
        /// A read or write failed (reset peer, broken pipe, `ENOBUFS` from `send`).
        case failed(any Error)
        /// The loop shut down.
        case shutDown
    }
}

/// The codes of `StreamConnection.openState` below 0: open without a known descriptor, and the three ends.
enum OpenState {
    /// Open; no descriptor noted (not TCP, or not connected yet).
    static let openCode: Int32 = -1
    /// Ended by `close()`, `reset()` or the owner (`EndReason.closed`), or closed without an end.
    static let closedCode: Int32 = -2
    /// Ended by the loop's shutdown (`EndReason.shutDown`).
    static let shutDownCode: Int32 = -3
    /// Ended by a failure (`EndReason.failed`); the error is in the extras (`StreamExtras.endError`).
    static let failedCode: Int32 = -4
}

extension StreamConnection {
    /// Notes how the stream ended, before `uv_close` (loop thread).
    ///
    /// Sequentially consistent: an address read on another thread checks this mark after its
    /// system call, and must see it whenever `uv_close` may already have closed the descriptor.
    func recordEnd(_ reason: EndReason) {
        let code: Int32
        switch reason {
        case .closed: code = OpenState.closedCode
        case .shutDown: code = OpenState.shutDownCode
        case .failed(let error):
            // A failure is rare: its error is kept in the extras, not in every stream.
            extras.endError = error
            code = OpenState.failedCode
        }
        openState.store(code, ordering: .sequentiallyConsistent)
    }

    /// How the stream ended; nil while open (loop thread, or any thread for the answer's kind).
    var endReason: EndReason? {
        switch openState.load(ordering: .acquiring) {
        case OpenState.closedCode: .closed
        case OpenState.shutDownCode: .shutDown
        case OpenState.failedCode:
            .failed(extrasIfMade?.endError ?? UVError(code: UV_EIO.rawValue, message: "the connection failed", context: "\(transport)"))
        default: nil
        }
    }

    /// Whether the stream is open as other threads see it (exact on the loop thread).
    ///
    /// Thread rule: safe from any thread; never blocks.
    var isOpenForAnyThread: Bool { openState.load(ordering: .acquiring) >= OpenState.openCode }
}

/// What made a stream, for its label and messages ("accepted by TCPServer.listen(127.0.0.1:80)"),
/// and the buffer limits it was given.
///
/// A listener makes one and every connection it accepts shares it, so an idle connection carries
/// no label and no limits of its own; its label (`StreamConnection.label`) is put together only
/// when something asks for it.
///
/// Thread rule: immutable; safe from any thread.
final class StreamOrigin: Sendable {
    /// The text, composed once.
    let text: String
    /// The limits of every stream that shares this origin (`StreamConnection.limits`).
    let limits: StreamBufferLimits
    /// The largest chunk one read hands the reader, 1...`ReadBuffer.size` (`StreamConnection.readChunkLimit`;
    /// `Files.chunks` of a FIFO asks for less).
    let readChunkLimit: Int
    /// The other end's name for every stream that shares this origin, unless one was given its own
    /// (`StreamConnection.peerDescription`): a Unix listener's socket path, so an accepted connection
    /// keeps no name of its own (nor the extras a name of its own would make).
    let peerName: String?
    /// Whether the streams stamp the loop time at each byte moved (`StreamConnection.noteActivity`), for an
    /// idle timeout the kernel does not keep the data for (a Unix server's `UnixSocketOptions.idleTimeout`).
    let tracksActivity: Bool

    init(_ text: String, limits: StreamBufferLimits, readChunkLimit: Int = ReadBuffer.size, peerName: String? = nil,
         tracksActivity: Bool = false) {
        self.text = text
        self.limits = limits
        self.readChunkLimit = max(1, min(readChunkLimit, ReadBuffer.size))
        self.peerName = peerName
        self.tracksActivity = tracksActivity
    }
}

/// A stream's transport and whether it passes descriptors, in one immutable byte: read from any
/// thread (`UnixConnection.isIPC`), so not among the loop's `StreamStateBits`, and one byte so
/// that the connection's small fields share a word.
///
/// Thread rule: a value type; safe from any thread.
struct StreamKind {
    private static let ipcBit: UInt8 = 0x80
    private let raw: UInt8

    init(_ transport: StreamConnection.Transport, ipc: Bool) {
        raw = transport.rawValue | (ipc ? Self.ipcBit : 0)
    }

    /// The transport.
    ///
    /// A bit cast, not `init(rawValue:)`, whose switch the send path would pay: the low bits are a
    /// `Transport`'s raw value, and a payload-free enum is stored as its case's index, which its
    /// default raw values equal.
    var transport: StreamConnection.Transport {
        unsafeBitCast(raw & ~Self.ipcBit, to: StreamConnection.Transport.self)
    }

    /// A pipe opened for descriptor passing.
    var ipc: Bool { raw & Self.ipcBit != 0 }
}

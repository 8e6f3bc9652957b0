internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension StreamConnection {
    /// Opens the handle on a descriptor that is already open (`uv_tcp_open`, `uv_pipe_open`, `uv_tty_init`).
    ///
    /// libuv never closes descriptors 0, 1 and 2 when the handle closes (it closes any other, so
    /// the handle owns `descriptor` from here on). `uv_tty_init` reopens a terminal's device and
    /// puts it over `descriptor`, so making it non-blocking does not touch other processes; a pipe
    /// or socket is made non-blocking in place. On failure the handle is closed (the descriptor is not).
    func open(descriptor: Int32) throws(UVError) {
        switch transport {
        case .tcp: try uvCheck(uv_tcp_init(loop.uvLoop, pointer(as: uv_tcp_t.self)), "uv_tcp_init")
        case .pipe, .childPipe, .fifo: try uvCheck(uv_pipe_init(loop.uvLoop, pointer(as: uv_pipe_t.self), 0), "uv_pipe_init")
        case .tty: try uvCheck(uv_tty_init(loop.uvLoop, pointer(as: uv_tty_t.self), descriptor, 0), "uv_tty_init(\(descriptor))")
        }
        didOpen()
        do {
            switch transport {
            case .tcp: try uvCheck(uv_tcp_open(pointer(as: uv_tcp_t.self), uv_os_sock_t(descriptor)), "uv_tcp_open(\(descriptor))")
            case .pipe, .childPipe, .fifo: try uvCheck(uv_pipe_open(pointer(as: uv_pipe_t.self), descriptor), "uv_pipe_open(\(descriptor))")
            case .tty: break
            }
        } catch {
            closeHandle()
            throw error
        }
    }
}

/// Closes a descriptor ReactiveUV owns; EINTR is not retried (Linux closes the descriptor anyway).
func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

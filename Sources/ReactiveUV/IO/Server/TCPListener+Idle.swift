internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension TCPListener: DrainableListener {
    /// Stops accepting: the listening socket closes (the object and its connections stay).
    ///
    /// Loop thread only.
    func stopAccepting() {
        lookup?.dispose()
        lookup = nil
        closeHandle()
    }

    /// The drain finished: the idle timer has no connection left to watch.
    ///
    /// Loop thread only.
    func didFinishDrain() {
        idleTimer?.dispose()
        idleTimer = nil
    }
}

extension TCPListener {
    /// How long since the connection last received or sent a byte, by the kernel's record
    /// (`TCP_INFO`), in milliseconds; nil when it cannot be read.
    ///
    /// Loop thread only.
    static func idleMilliseconds(of stream: StreamConnection) -> UInt32? {
        var descriptor = uv_os_fd_t()
        guard stream.isHandleOpen, uv_fileno(stream.handle, &descriptor) == 0 else { return nil }
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return nil }
        return min(info.tcpi_last_data_recv, info.tcpi_last_data_sent)
    }

    /// The error for server options that cannot be served (a zero or negative idle timeout, a
    /// connection limit below 1, a keep-alive delay past Linux's limit), or nil.
    static func optionsRefusal(_ options: TCPOptions, origin: String) -> UVError? {
        ListenerIdleCheck.refusal(of: options.idleTimeout, option: "TCPOptions.idleTimeout", context: origin)
            ?? ConnectionBudget.refusal(of: options.maxConnections, option: "TCPOptions.maxConnections", context: origin)
            ?? TCPOptions.keepAliveRefusal(options.keepAlive, context: origin)
    }
}

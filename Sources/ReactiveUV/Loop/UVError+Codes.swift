internal import CLibUV

// Named values for libuv's error codes, matched as swift-system's `Errno`
// (`catch UVError.connectionRefused`); each equals any error with its code.

extension UVError {
    // MARK: Connections and sockets

    /// `UV_ECONNREFUSED`: connection refused.
    /// Thread rule: safe from any thread.
    public static let connectionRefused = UVError(code: UV_ECONNREFUSED.rawValue)

    /// `UV_ECONNRESET`: connection reset by peer.
    /// Thread rule: safe from any thread.
    public static let connectionReset = UVError(code: UV_ECONNRESET.rawValue)

    /// `UV_ECONNABORTED`: software caused connection abort.
    /// Thread rule: safe from any thread.
    public static let connectionAborted = UVError(code: UV_ECONNABORTED.rawValue)

    /// `UV_EADDRINUSE`: address already in use.
    /// Thread rule: safe from any thread.
    public static let addressInUse = UVError(code: UV_EADDRINUSE.rawValue)

    /// `UV_EADDRNOTAVAIL`: address not available.
    /// Thread rule: safe from any thread.
    public static let addressNotAvailable = UVError(code: UV_EADDRNOTAVAIL.rawValue)

    /// `UV_EAFNOSUPPORT`: address family not supported.
    /// Thread rule: safe from any thread.
    public static let addressFamilyNotSupported = UVError(code: UV_EAFNOSUPPORT.rawValue)

    /// `UV_EALREADY`: connection already in progress.
    /// Thread rule: safe from any thread.
    public static let alreadyInProgress = UVError(code: UV_EALREADY.rawValue)

    /// `UV_EISCONN`: socket is already connected.
    /// Thread rule: safe from any thread.
    public static let alreadyConnected = UVError(code: UV_EISCONN.rawValue)

    /// `UV_ENOTCONN`: socket is not connected.
    /// Thread rule: safe from any thread.
    public static let notConnected = UVError(code: UV_ENOTCONN.rawValue)

    /// `UV_EPIPE`: broken pipe.
    /// Thread rule: safe from any thread.
    public static let brokenPipe = UVError(code: UV_EPIPE.rawValue)

    /// `UV_ETIMEDOUT`: connection timed out.
    /// Thread rule: safe from any thread.
    public static let timedOut = UVError(code: UV_ETIMEDOUT.rawValue)

    /// `UV_EHOSTUNREACH`: host is unreachable.
    /// Thread rule: safe from any thread.
    public static let hostUnreachable = UVError(code: UV_EHOSTUNREACH.rawValue)

    /// `UV_EHOSTDOWN`: host is down.
    /// Thread rule: safe from any thread.
    public static let hostDown = UVError(code: UV_EHOSTDOWN.rawValue)

    /// `UV_ENETUNREACH`: network is unreachable.
    /// Thread rule: safe from any thread.
    public static let networkUnreachable = UVError(code: UV_ENETUNREACH.rawValue)

    /// `UV_ENETDOWN`: network is down.
    /// Thread rule: safe from any thread.
    public static let networkDown = UVError(code: UV_ENETDOWN.rawValue)

    /// `UV_ENONET`: machine is not on the network.
    /// Thread rule: safe from any thread.
    public static let notOnNetwork = UVError(code: UV_ENONET.rawValue)

    /// `UV_EMSGSIZE`: message too long.
    /// Thread rule: safe from any thread.
    public static let messageTooLong = UVError(code: UV_EMSGSIZE.rawValue)

    /// `UV_ENOBUFS`: no buffer space available.
    /// Thread rule: safe from any thread.
    public static let noBufferSpace = UVError(code: UV_ENOBUFS.rawValue)

    /// `UV_ENOTSOCK`: socket operation on non-socket.
    /// Thread rule: safe from any thread.
    public static let notSocket = UVError(code: UV_ENOTSOCK.rawValue)

    /// `UV_EDESTADDRREQ`: destination address required.
    /// Thread rule: safe from any thread.
    public static let destinationAddressRequired = UVError(code: UV_EDESTADDRREQ.rawValue)

    /// `UV_EPROTO`: protocol error.
    /// Thread rule: safe from any thread.
    public static let protocolError = UVError(code: UV_EPROTO.rawValue)

    /// `UV_EPROTONOSUPPORT`: protocol not supported.
    /// Thread rule: safe from any thread.
    public static let protocolNotSupported = UVError(code: UV_EPROTONOSUPPORT.rawValue)

    /// `UV_ENOPROTOOPT`: protocol not available.
    /// Thread rule: safe from any thread.
    public static let protocolOptionNotAvailable = UVError(code: UV_ENOPROTOOPT.rawValue)

    /// `UV_EPROTOTYPE`: protocol wrong type for socket.
    /// Thread rule: safe from any thread.
    public static let wrongProtocolType = UVError(code: UV_EPROTOTYPE.rawValue)

    /// `UV_ESOCKTNOSUPPORT`: socket type not supported.
    /// Thread rule: safe from any thread.
    public static let socketTypeNotSupported = UVError(code: UV_ESOCKTNOSUPPORT.rawValue)

    /// `UV_ENOTSUP`: operation not supported on socket.
    /// Thread rule: safe from any thread.
    public static let notSupported = UVError(code: UV_ENOTSUP.rawValue)

    /// `UV_ESHUTDOWN`: cannot send after transport endpoint shutdown.
    /// Thread rule: safe from any thread.
    public static let sendAfterShutdown = UVError(code: UV_ESHUTDOWN.rawValue)

    /// `UV_EOF`: end of file (a stream ended; ReactiveUV usually completes instead).
    /// Thread rule: safe from any thread.
    public static let endOfFile = UVError(code: UV_EOF.rawValue)

    // MARK: Files and paths

    /// `UV_ENOENT`: no such file or directory.
    /// Thread rule: safe from any thread.
    public static let noSuchFile = UVError(code: UV_ENOENT.rawValue)

    /// `UV_EACCES`: permission denied.
    /// Thread rule: safe from any thread.
    public static let permissionDenied = UVError(code: UV_EACCES.rawValue)

    /// `UV_EPERM`: operation not permitted.
    /// Thread rule: safe from any thread.
    public static let notPermitted = UVError(code: UV_EPERM.rawValue)

    /// `UV_EEXIST`: file already exists.
    /// Thread rule: safe from any thread.
    public static let fileExists = UVError(code: UV_EEXIST.rawValue)

    /// `UV_EISDIR`: illegal operation on a directory.
    /// Thread rule: safe from any thread.
    public static let isDirectory = UVError(code: UV_EISDIR.rawValue)

    /// `UV_ENOTDIR`: not a directory.
    /// Thread rule: safe from any thread.
    public static let notDirectory = UVError(code: UV_ENOTDIR.rawValue)

    /// `UV_ENOTEMPTY`: directory not empty.
    /// Thread rule: safe from any thread.
    public static let directoryNotEmpty = UVError(code: UV_ENOTEMPTY.rawValue)

    /// `UV_EFBIG`: file too large.
    /// Thread rule: safe from any thread.
    public static let fileTooLarge = UVError(code: UV_EFBIG.rawValue)

    /// `UV_ENOSPC`: no space left on device.
    /// Thread rule: safe from any thread.
    public static let noSpace = UVError(code: UV_ENOSPC.rawValue)

    /// `UV_EROFS`: read-only file system.
    /// Thread rule: safe from any thread.
    public static let readOnlyFileSystem = UVError(code: UV_EROFS.rawValue)

    /// `UV_EXDEV`: cross-device link not permitted.
    /// Thread rule: safe from any thread.
    public static let crossDeviceLink = UVError(code: UV_EXDEV.rawValue)

    /// `UV_EMLINK`: too many links.
    /// Thread rule: safe from any thread.
    public static let tooManyLinks = UVError(code: UV_EMLINK.rawValue)

    /// `UV_ELOOP`: too many symbolic links encountered.
    /// Thread rule: safe from any thread.
    public static let tooManySymbolicLinks = UVError(code: UV_ELOOP.rawValue)

    /// `UV_ENAMETOOLONG`: name too long.
    /// Thread rule: safe from any thread.
    public static let nameTooLong = UVError(code: UV_ENAMETOOLONG.rawValue)

    /// `UV_ETXTBSY`: text file is busy.
    /// Thread rule: safe from any thread.
    public static let textFileBusy = UVError(code: UV_ETXTBSY.rawValue)

    /// `UV_ESPIPE`: invalid seek.
    /// Thread rule: safe from any thread.
    public static let invalidSeek = UVError(code: UV_ESPIPE.rawValue)

    /// `UV_ENODEV`: no such device.
    /// Thread rule: safe from any thread.
    public static let noSuchDevice = UVError(code: UV_ENODEV.rawValue)

    /// `UV_ENXIO`: no such device or address.
    /// Thread rule: safe from any thread.
    public static let noDeviceOrAddress = UVError(code: UV_ENXIO.rawValue)

    /// `UV_ENOTTY`: inappropriate ioctl for device.
    /// Thread rule: safe from any thread.
    public static let notTerminal = UVError(code: UV_ENOTTY.rawValue)

    /// `UV_EFTYPE`: inappropriate file type or format.
    /// Thread rule: safe from any thread.
    public static let inappropriateFileType = UVError(code: UV_EFTYPE.rawValue)

    /// `UV_EIO`: i/o error.
    /// Thread rule: safe from any thread.
    public static let ioError = UVError(code: UV_EIO.rawValue)

    /// `UV_EREMOTEIO`: remote I/O error.
    /// Thread rule: safe from any thread.
    public static let remoteIOError = UVError(code: UV_EREMOTEIO.rawValue)

    // MARK: Resources and processes

    /// `UV_EMFILE`: too many open files.
    /// Thread rule: safe from any thread.
    public static let tooManyOpenFiles = UVError(code: UV_EMFILE.rawValue)

    /// `UV_ENFILE`: file table overflow.
    /// Thread rule: safe from any thread.
    public static let fileTableOverflow = UVError(code: UV_ENFILE.rawValue)

    /// `UV_ENOMEM`: not enough memory.
    /// Thread rule: safe from any thread.
    public static let outOfMemory = UVError(code: UV_ENOMEM.rawValue)

    /// `UV_EBUSY`: resource busy or locked.
    /// Thread rule: safe from any thread.
    public static let busy = UVError(code: UV_EBUSY.rawValue)

    /// `UV_EAGAIN`: resource temporarily unavailable.
    /// Thread rule: safe from any thread.
    public static let resourceTemporarilyUnavailable = UVError(code: UV_EAGAIN.rawValue)

    /// `UV_EINTR`: interrupted system call.
    /// Thread rule: safe from any thread.
    public static let interrupted = UVError(code: UV_EINTR.rawValue)

    /// `UV_ESRCH`: no such process.
    /// Thread rule: safe from any thread.
    public static let noSuchProcess = UVError(code: UV_ESRCH.rawValue)

    /// `UV_E2BIG`: argument list too long.
    /// Thread rule: safe from any thread.
    public static let argumentListTooLong = UVError(code: UV_E2BIG.rawValue)

    /// `UV_ENOSYS`: function not implemented.
    /// Thread rule: safe from any thread.
    public static let notImplemented = UVError(code: UV_ENOSYS.rawValue)

    // MARK: Arguments and results

    /// `UV_EINVAL`: invalid argument.
    /// Thread rule: safe from any thread.
    public static let invalidArgument = UVError(code: UV_EINVAL.rawValue)

    /// `UV_ECANCELED`: operation canceled (a request cancelled, for example by disposing).
    /// Thread rule: safe from any thread.
    public static let cancelled = UVError(code: UV_ECANCELED.rawValue)

    /// `UV_EBADF`: bad file descriptor.
    /// Thread rule: safe from any thread.
    public static let badFileDescriptor = UVError(code: UV_EBADF.rawValue)

    /// `UV_EFAULT`: bad address in system call argument.
    /// Thread rule: safe from any thread.
    public static let badAddress = UVError(code: UV_EFAULT.rawValue)

    /// `UV_ERANGE`: result too large.
    /// Thread rule: safe from any thread.
    public static let resultTooLarge = UVError(code: UV_ERANGE.rawValue)

    /// `UV_EOVERFLOW`: value too large for defined data type.
    /// Thread rule: safe from any thread.
    public static let valueTooLarge = UVError(code: UV_EOVERFLOW.rawValue)

    /// `UV_EILSEQ`: illegal byte sequence.
    /// Thread rule: safe from any thread.
    public static let illegalByteSequence = UVError(code: UV_EILSEQ.rawValue)

    /// `UV_ECHARSET`: invalid Unicode character.
    /// Thread rule: safe from any thread.
    public static let invalidUnicodeCharacter = UVError(code: UV_ECHARSET.rawValue)

    /// `UV_UNKNOWN`: unknown error (a code libuv could not map).
    /// Thread rule: safe from any thread.
    public static let unknown = UVError(code: UV_UNKNOWN.rawValue)

    // MARK: Name resolution (getaddrinfo)

    /// `UV_EAI_NONAME`: unknown node or service (a host name that does not exist, or a name the resolver rejects).
    /// Thread rule: safe from any thread.
    public static let nameNotFound = UVError(code: UV_EAI_NONAME.rawValue)

    /// `UV_EAI_AGAIN`: temporary failure (often: no DNS server answered).
    /// Thread rule: safe from any thread.
    public static let nameTemporaryFailure = UVError(code: UV_EAI_AGAIN.rawValue)

    /// `UV_EAI_FAIL`: permanent failure.
    /// Thread rule: safe from any thread.
    public static let nameServerFailure = UVError(code: UV_EAI_FAIL.rawValue)

    /// `UV_EAI_NODATA`: no address.
    /// Thread rule: safe from any thread.
    public static let noAddressForName = UVError(code: UV_EAI_NODATA.rawValue)

    /// `UV_EAI_ADDRFAMILY`: address family not supported.
    /// Thread rule: safe from any thread.
    public static let noAddressInFamily = UVError(code: UV_EAI_ADDRFAMILY.rawValue)

    /// `UV_EAI_SERVICE`: service not available for socket type.
    /// Thread rule: safe from any thread.
    public static let serviceNotFound = UVError(code: UV_EAI_SERVICE.rawValue)

    /// `UV_EAI_CANCELED`: request canceled.
    /// Thread rule: safe from any thread.
    public static let resolutionCancelled = UVError(code: UV_EAI_CANCELED.rawValue)

    /// `UV_EAI_MEMORY`: out of memory.
    /// Thread rule: safe from any thread.
    public static let resolverOutOfMemory = UVError(code: UV_EAI_MEMORY.rawValue)

    /// `UV_EAI_FAMILY`: ai_family not supported.
    /// Thread rule: safe from any thread.
    public static let resolverFamilyNotSupported = UVError(code: UV_EAI_FAMILY.rawValue)

    /// `UV_EAI_SOCKTYPE`: socket type not supported.
    /// Thread rule: safe from any thread.
    public static let resolverSocketTypeNotSupported = UVError(code: UV_EAI_SOCKTYPE.rawValue)

    /// `UV_EAI_BADFLAGS`: bad ai_flags value.
    /// Thread rule: safe from any thread.
    public static let resolverBadFlags = UVError(code: UV_EAI_BADFLAGS.rawValue)

    /// `UV_EAI_BADHINTS`: invalid value for hints.
    /// Thread rule: safe from any thread.
    public static let resolverBadHints = UVError(code: UV_EAI_BADHINTS.rawValue)

    /// `UV_EAI_OVERFLOW`: argument buffer overflow.
    /// Thread rule: safe from any thread.
    public static let resolverOverflow = UVError(code: UV_EAI_OVERFLOW.rawValue)

    /// `UV_EAI_PROTOCOL`: resolved protocol is unknown.
    /// Thread rule: safe from any thread.
    public static let resolverProtocolUnknown = UVError(code: UV_EAI_PROTOCOL.rawValue)

}

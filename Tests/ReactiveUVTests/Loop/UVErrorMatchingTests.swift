import CLibUV
import Foundation
@testable import ReactiveUV
@testable import ReactiveUVCore
import ReactiveUVTesting
import XCTest

/// Named error codes a caller can match on (`catch UVError.connectionRefused`), equality by code,
/// and errors for codes libuv does not know made without leaking.
final class UVErrorMatchingTests: XCTestCase {
    func testEachNamedValueHasLibuvsCodeAndName() {
        let table: [(UVError, Int32, String)] = [
            (.connectionRefused, UV_ECONNREFUSED.rawValue, "ECONNREFUSED"),
            (.connectionReset, UV_ECONNRESET.rawValue, "ECONNRESET"),
            (.connectionAborted, UV_ECONNABORTED.rawValue, "ECONNABORTED"),
            (.addressInUse, UV_EADDRINUSE.rawValue, "EADDRINUSE"),
            (.addressNotAvailable, UV_EADDRNOTAVAIL.rawValue, "EADDRNOTAVAIL"),
            (.addressFamilyNotSupported, UV_EAFNOSUPPORT.rawValue, "EAFNOSUPPORT"),
            (.alreadyInProgress, UV_EALREADY.rawValue, "EALREADY"),
            (.alreadyConnected, UV_EISCONN.rawValue, "EISCONN"),
            (.notConnected, UV_ENOTCONN.rawValue, "ENOTCONN"),
            (.brokenPipe, UV_EPIPE.rawValue, "EPIPE"),
            (.timedOut, UV_ETIMEDOUT.rawValue, "ETIMEDOUT"),
            (.hostUnreachable, UV_EHOSTUNREACH.rawValue, "EHOSTUNREACH"),
            (.hostDown, UV_EHOSTDOWN.rawValue, "EHOSTDOWN"),
            (.networkUnreachable, UV_ENETUNREACH.rawValue, "ENETUNREACH"),
            (.networkDown, UV_ENETDOWN.rawValue, "ENETDOWN"),
            (.notOnNetwork, UV_ENONET.rawValue, "ENONET"),
            (.messageTooLong, UV_EMSGSIZE.rawValue, "EMSGSIZE"),
            (.noBufferSpace, UV_ENOBUFS.rawValue, "ENOBUFS"),
            (.notSocket, UV_ENOTSOCK.rawValue, "ENOTSOCK"),
            (.destinationAddressRequired, UV_EDESTADDRREQ.rawValue, "EDESTADDRREQ"),
            (.protocolError, UV_EPROTO.rawValue, "EPROTO"),
            (.protocolNotSupported, UV_EPROTONOSUPPORT.rawValue, "EPROTONOSUPPORT"),
            (.protocolOptionNotAvailable, UV_ENOPROTOOPT.rawValue, "ENOPROTOOPT"),
            (.wrongProtocolType, UV_EPROTOTYPE.rawValue, "EPROTOTYPE"),
            (.socketTypeNotSupported, UV_ESOCKTNOSUPPORT.rawValue, "ESOCKTNOSUPPORT"),
            (.notSupported, UV_ENOTSUP.rawValue, "ENOTSUP"),
            (.sendAfterShutdown, UV_ESHUTDOWN.rawValue, "ESHUTDOWN"),
            (.endOfFile, UV_EOF.rawValue, "EOF"),
            (.noSuchFile, UV_ENOENT.rawValue, "ENOENT"),
            (.permissionDenied, UV_EACCES.rawValue, "EACCES"),
            (.notPermitted, UV_EPERM.rawValue, "EPERM"),
            (.fileExists, UV_EEXIST.rawValue, "EEXIST"),
            (.isDirectory, UV_EISDIR.rawValue, "EISDIR"),
            (.notDirectory, UV_ENOTDIR.rawValue, "ENOTDIR"),
            (.directoryNotEmpty, UV_ENOTEMPTY.rawValue, "ENOTEMPTY"),
            (.fileTooLarge, UV_EFBIG.rawValue, "EFBIG"),
            (.noSpace, UV_ENOSPC.rawValue, "ENOSPC"),
            (.readOnlyFileSystem, UV_EROFS.rawValue, "EROFS"),
            (.crossDeviceLink, UV_EXDEV.rawValue, "EXDEV"),
            (.tooManyLinks, UV_EMLINK.rawValue, "EMLINK"),
            (.tooManySymbolicLinks, UV_ELOOP.rawValue, "ELOOP"),
            (.nameTooLong, UV_ENAMETOOLONG.rawValue, "ENAMETOOLONG"),
            (.textFileBusy, UV_ETXTBSY.rawValue, "ETXTBSY"),
            (.invalidSeek, UV_ESPIPE.rawValue, "ESPIPE"),
            (.noSuchDevice, UV_ENODEV.rawValue, "ENODEV"),
            (.noDeviceOrAddress, UV_ENXIO.rawValue, "ENXIO"),
            (.notTerminal, UV_ENOTTY.rawValue, "ENOTTY"),
            (.inappropriateFileType, UV_EFTYPE.rawValue, "EFTYPE"),
            (.ioError, UV_EIO.rawValue, "EIO"),
            (.remoteIOError, UV_EREMOTEIO.rawValue, "EREMOTEIO"),
            (.tooManyOpenFiles, UV_EMFILE.rawValue, "EMFILE"),
            (.fileTableOverflow, UV_ENFILE.rawValue, "ENFILE"),
            (.outOfMemory, UV_ENOMEM.rawValue, "ENOMEM"),
            (.busy, UV_EBUSY.rawValue, "EBUSY"),
            (.resourceTemporarilyUnavailable, UV_EAGAIN.rawValue, "EAGAIN"),
            (.interrupted, UV_EINTR.rawValue, "EINTR"),
            (.noSuchProcess, UV_ESRCH.rawValue, "ESRCH"),
            (.argumentListTooLong, UV_E2BIG.rawValue, "E2BIG"),
            (.notImplemented, UV_ENOSYS.rawValue, "ENOSYS"),
            (.invalidArgument, UV_EINVAL.rawValue, "EINVAL"),
            (.cancelled, UV_ECANCELED.rawValue, "ECANCELED"),
            (.badFileDescriptor, UV_EBADF.rawValue, "EBADF"),
            (.badAddress, UV_EFAULT.rawValue, "EFAULT"),
            (.resultTooLarge, UV_ERANGE.rawValue, "ERANGE"),
            (.valueTooLarge, UV_EOVERFLOW.rawValue, "EOVERFLOW"),
            (.illegalByteSequence, UV_EILSEQ.rawValue, "EILSEQ"),
            (.invalidUnicodeCharacter, UV_ECHARSET.rawValue, "ECHARSET"),
            (.unknown, UV_UNKNOWN.rawValue, "UNKNOWN"),
            (.nameNotFound, UV_EAI_NONAME.rawValue, "EAI_NONAME"),
            (.nameTemporaryFailure, UV_EAI_AGAIN.rawValue, "EAI_AGAIN"),
            (.nameServerFailure, UV_EAI_FAIL.rawValue, "EAI_FAIL"),
            (.noAddressForName, UV_EAI_NODATA.rawValue, "EAI_NODATA"),
            (.noAddressInFamily, UV_EAI_ADDRFAMILY.rawValue, "EAI_ADDRFAMILY"),
            (.serviceNotFound, UV_EAI_SERVICE.rawValue, "EAI_SERVICE"),
            (.resolutionCancelled, UV_EAI_CANCELED.rawValue, "EAI_CANCELED"),
            (.resolverOutOfMemory, UV_EAI_MEMORY.rawValue, "EAI_MEMORY"),
            (.resolverFamilyNotSupported, UV_EAI_FAMILY.rawValue, "EAI_FAMILY"),
            (.resolverSocketTypeNotSupported, UV_EAI_SOCKTYPE.rawValue, "EAI_SOCKTYPE"),
            (.resolverBadFlags, UV_EAI_BADFLAGS.rawValue, "EAI_BADFLAGS"),
            (.resolverBadHints, UV_EAI_BADHINTS.rawValue, "EAI_BADHINTS"),
            (.resolverOverflow, UV_EAI_OVERFLOW.rawValue, "EAI_OVERFLOW"),
            (.resolverProtocolUnknown, UV_EAI_PROTOCOL.rawValue, "EAI_PROTOCOL"),
        ]
        for (named, code, name) in table {
            XCTAssertEqual(named.code, code, name)
            XCTAssertEqual(named.name, name)
            XCTAssertEqual(named.message, String(cString: uv_strerror(code)), name)
            XCTAssertEqual(named.context, "", name)
        }
        XCTAssertEqual(Set(table.map(\.1)).count, table.count, "two named values share a code")
    }

    func testEqualityAndHashingCompareTheCodeOnly() {
        let withContext = UVError(code: UV_ECONNREFUSED.rawValue, context: "uv_tcp_connect(127.0.0.1:1)")
        let withMessage = UVError(code: UV_ECONNREFUSED.rawValue, message: "nobody listens", context: "connect")
        XCTAssertEqual(withContext, .connectionRefused)
        XCTAssertEqual(withMessage, withContext)
        XCTAssertEqual(withContext.hashValue, UVError.connectionRefused.hashValue)
        XCTAssertEqual(Set([withContext, withMessage, .connectionRefused]).count, 1)
        XCTAssertNotEqual(withContext, .connectionReset)
        XCTAssertEqual(withContext.context, "uv_tcp_connect(127.0.0.1:1)", "the context is kept, only not compared")
    }

    func testCatchAndSwitchMatchByCode() {
        func thrown(_ error: any Error) -> String {
            do {
                throw error
            } catch UVError.connectionRefused {
                return "refused"
            } catch UVError.nameNotFound {
                return "no name"
            } catch {
                return "other"
            }
        }
        XCTAssertEqual(thrown(UVError(code: UV_ECONNREFUSED.rawValue, context: "connect")), "refused")
        XCTAssertEqual(thrown(UVError(code: UV_EAI_NONAME.rawValue, context: "resolving x")), "no name")
        XCTAssertEqual(thrown(UVError(code: UV_ECONNRESET.rawValue)), "other")
        XCTAssertEqual(thrown(CancellationError()), "other", "an error of another type never matches")

        let typed: UVError = UVError(code: UV_EADDRINUSE.rawValue, context: "bind")
        switch typed {
        case .addressNotAvailable: XCTFail("matched another code")
        case .addressInUse: break
        default: XCTFail("did not match its own code")
        }
        let untyped: any Error = typed
        switch untyped {
        case UVError.addressInUse: break
        default: XCTFail("an existential UVError did not match its code")
        }
    }

    func testCatchMatchesTheErrorsOfRealFailures() {
        LoopHarness.run { harness in
            let port = try unusedPort()
            XCTAssertEqual(try caught { _ = try TCP.connect(host: "127.0.0.1", port: port, on: harness.loop).first(timeout: .seconds(10)) }, "connectionRefused")

            let (_, busyPort) = try startServer(harness)
            XCTAssertEqual(try caught { _ = try TCPServer.listen(port: busyPort, on: harness.loop).first(timeout: .seconds(10)) }, "addressInUse")

            let missing = NSTemporaryDirectory() + "reactiveuv-no-such-file-\(UUID())"
            XCTAssertEqual(try caught { _ = try Files.read(missing, on: harness.loop).first(timeout: .seconds(10)) }, "noSuchFile")

            // An empty label ("..") makes glibc answer EAI_NONAME before asking any DNS server,
            // so the code is the same with or without a network (a plain unknown name is
            // EAI_AGAIN where no server answers).
            XCTAssertEqual(try caught { _ = try DNS.resolve("no-such-host..invalid", on: harness.loop).first(timeout: .seconds(10)) }, "nameNotFound")
        }
    }

    /// libuv 1.44's `uv_err_name` and `uv_strerror` malloc a string nobody frees for a
    /// code they do not know; UVError uses the `_r` forms into a stack buffer.
    func testErrorsForUnknownCodesDoNotGrowTheHeap() {
        let unknown: Int32 = -123_456
        let sample = UVError(code: unknown)
        XCTAssertEqual(sample.name, "Unknown system error -123456")
        XCTAssertEqual(sample.message, "Unknown system error -123456")
        let before = liveHeapMegabytes()
        for _ in 0..<100_000 {
            let error = UVError(code: unknown, context: "probe")
            precondition(error.code == unknown)
        }
        let grown = liveHeapMegabytes() - before
        // The leaking calls grew it by 9 MB here (100,000 pairs of ~32-byte strings); a few allocator pages are noise.
        XCTAssertLessThan(grown, 1, "making UVErrors for an unknown code grew the live heap by \(grown) MB")
    }

    /// What `body` threw, by the first pattern it matches.
    private func caught(_ body: () throws -> Void) throws -> String {
        do {
            try body()
            return "nothing thrown"
        } catch UVError.connectionRefused {
            return "connectionRefused"
        } catch UVError.addressInUse {
            return "addressInUse"
        } catch UVError.noSuchFile {
            return "noSuchFile"
        } catch UVError.nameNotFound {
            return "nameNotFound"
        } catch {
            return "another error: \(error)"
        }
    }
}

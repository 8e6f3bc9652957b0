import CLibUV
@testable import ReactiveUV
@testable import ReactiveUVCore
import XCTest

final class UVErrorTests: XCTestCase {
    func testNameAndMessageComeFromLibuv() {
        let error = UVError(code: UV_ENOENT.rawValue, context: "uv_fs_event_start(/nope)")
        XCTAssertEqual(error.code, UV_ENOENT.rawValue)
        XCTAssertEqual(error.name, "ENOENT")
        XCTAssertEqual(error.message, "no such file or directory")
        XCTAssertEqual(error.description, "ENOENT: no such file or directory (uv_fs_event_start(/nope))")
        XCTAssertEqual(UVError(code: UV_EADDRINUSE.rawValue).description, "EADDRINUSE: address already in use")
    }

    func testCustomMessageKeepsLibuvName() {
        let error = UVError(code: UVError.invalidArgumentCode, message: "interval must be positive")
        XCTAssertEqual(error.name, "EINVAL")
        XCTAssertEqual(error.description, "EINVAL: interval must be positive")
    }

    func testTheCheckingHelperThrowsOnlyForNegativeResults() {
        XCTAssertEqual(try uvCheck(0, "ok"), 0)
        XCTAssertEqual(try uvCheck(7, "positive"), 7)
        XCTAssertThrowsError(try uvCheck(UV_EACCES.rawValue, "uv_tcp_bind(0.0.0.0:80)")) { error in
            XCTAssertEqual((error as? UVError)?.name, "EACCES")
            XCTAssertEqual((error as? UVError)?.context, "uv_tcp_bind(0.0.0.0:80)")
        }
    }
}

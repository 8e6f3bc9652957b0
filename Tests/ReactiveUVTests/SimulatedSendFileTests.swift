import EchoServerKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `sendFile` has no simulated backend: on a simulated connection it fails at once with a named
/// error, and no real descriptor is touched (a simulated file's descriptor is negative).
final class SimulatedSendFileTests: XCTestCase {
    func testSendFileOfASimulatedFileFailsAtOnceWithEBADF() throws {
        Simulation.check(seed: 93) { simulation in
            let server = simulation.makeLoop(name: "server")
            _ = try simulation.record(EchoServer.run(port: 7000), on: server)
            let written = try simulation.record(Files.write(Array("payload".utf8), to: "/f"))
            simulation.run(for: .milliseconds(1))
            XCTAssertEqual(written.terminal.map { "\($0)" }, "completed")
            let sent = try simulation.record(TCP.connect(host: "127.0.0.1", port: 7000).flatMap { connection in
                Files.open("/f").flatMap { file in
                    connection.sendFile(file)
                }
            })
            simulation.run(for: .milliseconds(50))
            let error = sent.terminal?.error as? UVError
            XCTAssertEqual(error, .badFileDescriptor, "\(sent.recorded)")
            XCTAssertEqual(error?.message, "the connection has no descriptor")
        }
    }
}

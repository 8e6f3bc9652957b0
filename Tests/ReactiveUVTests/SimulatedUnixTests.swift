import EchoServerKit
@testable import ReactiveUV
@testable import ReactiveUVTesting
import XCTest

/// `UnixSocket.connect` and `UnixSocket.listen`/`serve` (the echo sample's Unix server) on a
/// simulation's network: paths are names of the simulation, not files.
final class SimulatedUnixTests: XCTestCase {
    private func ms(_ value: UInt64) -> SchedulerInstant { SchedulerInstant(nanoseconds: value * 1_000_000) }
    private let path = "/run/simulated-echo.sock"

    func testTheEchoSampleServesAUnixSocketOnVirtualTime() throws {
        Simulation.check(seed: 81) { simulation in
            let server = simulation.makeLoop(name: "server")
            let events = try simulation.record(EchoServer.run(unixPath: path), on: server)
            let payloads: [[UInt8]] = [[1, 2, 3], Array(repeating: 7, count: 70_000)]
            let clients = try payloads.map { bytes in
                try simulation.record(UnixSocket.connect(path: path).flatMap { connection in
                    connection.send(bytes)
                    connection.shutdown()
                    return connection.bytes
                })
            }
            simulation.runUntilIdle()
            for (index, recorder) in clients.enumerated() {
                XCTAssertEqual(Array(recorder.values.joined()), payloads[index], "client \(index)")
                guard case .completed? = recorder.terminal else { return XCTFail("client \(index): \(recorder.recorded)") }
            }
            // Connected at once; the server hears at 1 ms and echoes; the echo is back at 2 ms.
            XCTAssertEqual(clients[0].recorded.first?.time, ms(2))
            guard case .listeningOnPath(let listening)? = events.values.first else { return XCTFail("\(events.values)") }
            XCTAssertEqual(listening, path)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "no file: the path is the simulation's")
        }
    }

    func testConnectingToAPathNobodyServesIsENOENTAndASecondServerIsEADDRINUSE() throws {
        Simulation.check(seed: 82) { simulation in
            let missing = try simulation.record(UnixSocket.connect(path: path))
            let first = try simulation.record(UnixSocket.serve(path: path))
            let second = try simulation.record(UnixSocket.serve(path: path))
            let passing = try simulation.record(UnixSocket.connect(path: path, options: UnixSocketOptions(ipc: true)))
            simulation.runUntilIdle()
            XCTAssertEqual((missing.terminal?.error as? UVError)?.code, UVError.noSuchFileCode)
            guard case .listening? = first.values.first else { return XCTFail("\(first.recorded)") }
            XCTAssertEqual((second.terminal?.error as? UVError)?.code, UVError.addressInUseCode)
            XCTAssertEqual(passing.values.first?.isIPC, true, "an IPC client connects as any other (SimulatedDescriptorPassingTests)")
        }
    }
}

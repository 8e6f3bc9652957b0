import Foundation
import ReactiveUV
import ReactiveUVTesting
import XCTest

/// Certificates for the TLS tests, made with the `openssl` command in a temporary directory:
/// a CA, a server certificate for localhost and 127.0.0.1, an expired one, one for another host,
/// a client certificate, and a self-signed one no CA vouches for. Made once per test run.
struct TLSTestCertificates: Sendable {
    let directory: String

    var caCertificate: String { "\(directory)/ca.pem" }
    var serverCertificate: String { "\(directory)/server.pem" }
    var serverKey: String { "\(directory)/server.key" }
    var expiredCertificate: String { "\(directory)/expired.pem" }
    var wrongHostCertificate: String { "\(directory)/wronghost.pem" }
    var clientCertificate: String { "\(directory)/client.pem" }
    var clientKey: String { "\(directory)/client.key" }
    var otherKey: String { "\(directory)/other.key" }
    var selfSignedCertificate: String { "\(directory)/selfsigned.pem" }
    var selfSignedKey: String { "\(directory)/selfsigned.key" }
    /// For alpha.test and for *.beta.test (subjects CN=alpha.test and CN=beta.test), with `serverKey`.
    var alphaCertificate: String { "\(directory)/alpha.pem" }
    var betaCertificate: String { "\(directory)/beta.pem" }

    /// The set, made on first use.
    static func shared() throws -> TLSTestCertificates {
        try made.get()
    }

    private static let made: Result<TLSTestCertificates, any Error> = Result {
        let directory = NSTemporaryDirectory() + "reactiveuv-tls-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func openssl(_ arguments: String) throws {
            let output = try runTool("/usr/bin/openssl", arguments.split(separator: " ").map(String.init), in: directory)
            guard output.status == 0 else { throw TestFailure("openssl \(arguments) failed: \(output.text)") }
        }
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
        try openssl("req -x509 \(key) -keyout ca.key -out ca.pem -days 30 -subj /CN=ReactiveUV-Test-CA")
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: "\(directory)/server.ext", atomically: true, encoding: .utf8)
        try "subjectAltName=DNS:elsewhere.example\n".write(toFile: "\(directory)/wronghost.ext", atomically: true, encoding: .utf8)
        try "extendedKeyUsage=clientAuth\n".write(toFile: "\(directory)/client.ext", atomically: true, encoding: .utf8)
        try openssl("req \(key) -keyout server.key -out server.csr -subj /CN=localhost")
        try openssl("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 30 -extfile server.ext")
        try openssl("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out expired.pem -days -1 -extfile server.ext")
        try openssl("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out wronghost.pem -days 30 -extfile wronghost.ext")
        try openssl("req \(key) -keyout client.key -out client.csr -subj /O=ReactiveUV/CN=test-client")
        try openssl("x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 30 -extfile client.ext")
        try openssl("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out other.key")
        try openssl("req -x509 \(key) -keyout selfsigned.key -out selfsigned.pem -days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1")
        for (name, san) in [("alpha", "DNS:alpha.test"), ("beta", "DNS:*.beta.test")] {
            try "subjectAltName=\(san)\n".write(toFile: "\(directory)/\(name).ext", atomically: true, encoding: .utf8)
            try openssl("req -new -key server.key -out \(name).csr -subj /CN=\(name).test")
            try openssl("x509 -req -in \(name).csr -CA ca.pem -CAkey ca.key -CAcreateserial -out \(name).pem -days 30 -extfile \(name).ext")
        }
        return TLSTestCertificates(directory: directory)
    }

    /// A server configuration with the localhost certificate (or `certificate`) and its key.
    func server(certificate: String? = nil, key: String? = nil, clientCertificates: TLSServerConfiguration.ClientCertificates = .none,
                applicationProtocols: [String] = [], handshakeTimeout: Duration = .seconds(10)) throws -> TLSServerConfiguration {
        try TLSServerConfiguration(certificateChain: .file(certificate ?? serverCertificate), privateKey: .file(key ?? serverKey),
                                   clientCertificates: clientCertificates, clientTrustRoots: .certificates(.file(caCertificate)),
                                   applicationProtocols: applicationProtocols, handshakeTimeout: handshakeTimeout)
    }

    /// A client configuration trusting the test CA.
    func client(serverName: String? = nil, applicationProtocols: [String] = [], withCertificate: Bool = false) throws -> TLSClientConfiguration {
        try TLSClientConfiguration(trustRoots: .certificates(.file(caCertificate)), serverName: serverName,
                                   applicationProtocols: applicationProtocols,
                                   certificateChain: withCertificate ? .file(clientCertificate) : nil,
                                   privateKey: withCertificate ? .file(clientKey) : nil)
    }
}

/// Runs `path` with `arguments` to its end and returns its status and output (standard output and error).
func runTool(_ path: String, _ arguments: [String], in directory: String? = nil, input: String? = nil) throws -> (status: Int32, text: String) {
    let child = try startTool(path, arguments, in: directory, input: input)
    let text = String(decoding: child.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.process.waitUntilExit()
    return (child.process.terminationStatus, text)
}

/// A peer process (`openssl s_server`, a Python script) with its output in a pipe.
struct ToolProcess {
    let process: Process
    let output: Pipe
    let input: Pipe

    /// Reads the output up to and including the first line holding `marker` (its text), or nil at EOF.
    func readLine(containing marker: String) -> String? {
        var text = ""
        while true {
            let data = output.fileHandleForReading.readData(ofLength: 1)
            if data.isEmpty { return nil }
            text += String(decoding: data, as: UTF8.self)
            if text.hasSuffix("\n") {
                if text.contains(marker) { return text }
                text = ""
            }
        }
    }

    /// The rest of the output, after the process ended, and its status. A peer still running after
    /// two minutes is ended (a test waiting on a peer that waits on it fails instead of hanging).
    func finish() -> (status: Int32, text: String) {
        try? input.fileHandleForWriting.close()
        let process = self.process
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: watchdog)
        defer { watchdog.cancel() }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// Ends the process (it is ours) and reaps it.
    func stop() {
        if process.isRunning { process.terminate() }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

func startTool(_ path: String, _ arguments: [String], in directory: String? = nil, input: String? = nil) throws -> ToolProcess {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let output = Pipe()
    let inputPipe = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = inputPipe
    try process.run()
    if let input {
        inputPipe.fileHandleForWriting.write(Data(input.utf8))
        try? inputPipe.fileHandleForWriting.close()
    }
    return ToolProcess(process: process, output: output, input: inputPipe)
}

/// The Python interpreter the TLS tests drive `ssl` peers with.
let pythonPath: String = {
    for candidate in ["/usr/bin/python3", "/usr/local/bin/python3"] where FileManager.default.isExecutableFile(atPath: candidate) {
        return candidate
    }
    return "/usr/bin/env"
}()

/// Runs a Python script (with `python3` through env when no interpreter was found at the usual paths).
func startPython(_ script: String, _ arguments: [String]) throws -> ToolProcess {
    pythonPath == "/usr/bin/env"
        ? try startTool(pythonPath, ["python3", "-u", "-c", script] + arguments)
        : try startTool(pythonPath, ["-u", "-c", script] + arguments)
}

/// A Python `ssl` echo server on a free port: prints "PORT n", serves one client (echoes until
/// its close_notify or EOF, then sends close_notify), prints "DONE", exits.
/// Arguments: certificate, key, CA file for client certificates or "-", ALPN list (comma-separated) or "-".
let pythonEchoServer = """
import socket, ssl, sys
cert, key, ca, alpn = sys.argv[1:5]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
if ca != "-":
    context.load_verify_locations(ca)
    context.verify_mode = ssl.CERT_REQUIRED
if alpn != "-":
    context.set_alpn_protocols(alpn.split(","))
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print("PORT", listener.getsockname()[1], flush=True)
raw, _ = listener.accept()
try:
    connection = context.wrap_socket(raw, server_side=True)
except Exception as error:
    print("HANDSHAKE-FAILED", error, flush=True)
    sys.exit(0)
print("ALPN", connection.selected_alpn_protocol(), flush=True)
total = 0
while True:
    try:
        data = connection.recv(65536)
    except ssl.SSLError as error:
        print("READ-FAILED", error, flush=True)
        break
    if not data:
        break
    total += len(data)
    connection.sendall(data)
print("RECEIVED", total, flush=True)
try:
    connection.unwrap()
except Exception:
    pass
print("DONE", flush=True)
"""

/// A Python `ssl` client: connects to 127.0.0.1:port trusting the CA (server name "localhost"),
/// sends the message, reads until close_notify/EOF, prints "GOT <text>" and the version.
/// Arguments: port, CA file, message, client certificate or "-", client key or "-".
let pythonClient = """
import socket, ssl, sys
port, ca, message, cert, key = sys.argv[1:6]
context = ssl.create_default_context(cafile=ca)
if cert != "-":
    context.load_cert_chain(cert, key)
raw = socket.create_connection(("127.0.0.1", int(port)))
try:
    connection = context.wrap_socket(raw, server_hostname="localhost")
except Exception as error:
    print("HANDSHAKE-FAILED", error, flush=True)
    sys.exit(0)
print("VERSION", connection.version(), flush=True)
connection.sendall(message.encode())
received = b""
try:
    while True:
        data = connection.recv(65536)
        if not data:
            break
        received += data
        if len(received) >= len(message):
            break
except ssl.SSLError as error:
    print("READ-FAILED", error, flush=True)
print("GOT", received.decode(), flush=True)
connection.unwrap()
print("DONE", flush=True)
"""

/// A Python `ssl` client over memory BIOs that finishes the handshake, then sends half of one
/// record and ends the socket: with FIN ("fin") or RST ("reset"). Prints "SENT-HALF" first.
/// Arguments: port, CA file, mode.
let pythonHalfRecordClient = """
import socket, ssl, struct, sys, time
port, ca, mode = sys.argv[1:4]
context = ssl.create_default_context(cafile=ca)
raw = socket.create_connection(("127.0.0.1", int(port)))
incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
while True:
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        raw.sendall(outgoing.read())
        data = raw.recv(65536)
        if not data:
            sys.exit("closed during the handshake")
        incoming.write(data)
raw.sendall(outgoing.read())
tls.write(b"x" * 1000)
record = outgoing.read()
raw.sendall(record[: len(record) // 2])
print("SENT-HALF", flush=True)
time.sleep(0.2)
if mode == "reset":
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()
else:
    raw.shutdown(socket.SHUT_WR)
    try:
        raw.recv(65536)
    except Exception:
        pass
    raw.close()
print("DONE", flush=True)
"""

/// The base of the TLS test classes: the shared certificates, and a harness whose leak check ends the test.
class TLSTestCase: XCTestCase {
    var certificates: TLSTestCertificates!

    override func setUpWithError() throws {
        try super.setUpWithError()
        certificates = try TLSTestCertificates.shared()
    }

    /// Runs `body` with a harness named after the test class; fails on a thrown error or what `finish()` reports.
    func withHarness(_ body: (LoopHarness) throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        let harness = LoopHarness(name: String(describing: type(of: self)))
        do { try body(harness) } catch { XCTFail("\(error)", file: file, line: line) }
        let report = harness.finish()
        XCTAssertTrue(report.isClean, "\(report.problems)", file: file, line: line)
    }

    /// An echo server on a free port (each connection echoes what it reads and closes after the
    /// peer's end); returns its recorder, its port and the handshake failures it heard of.
    func startTLSEchoServer(_ harness: LoopHarness, tls: TLSServerConfiguration, options: TCPOptions = TCPOptions()) throws
        -> (server: EventRecorder<TCPServer.Event>, port: Int, failures: Locked<[TLSError]>) {
        let failures = Locked<[TLSError]>([])
        let events = TCPServer.serve(host: "127.0.0.1", port: 0, options: options, tls: tls, on: harness.loop,
                                     onHandshakeFailure: { error in failures.withLock { $0.append(error) } })
            .map { event -> TCPServer.Event in
                if case .accepted(let connection) = event {
                    connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
                }
                return event
            }
        let server = try harness.record(events, label: "tls server")
        guard case .listening(let address) = try server.waitForValues(1)[0] else { throw TestFailure("not listening") }
        return (server, address.port, failures)
    }
}

import CBaselines
import Foundation
import ReactiveUV

/// The TLS modes' certificate: ECDSA P-256 for "localhost", made with the `openssl` command
/// once, kept in the temporary directory for later runs.
enum TLSProfileFiles {
    static func make() -> (certificate: String, key: String) {
        // One directory for every run, made once: under valgrind, Foundation's Process cannot start
        // the `openssl` command, so it runs through system(3).
        let directory = NSTemporaryDirectory() + "/ruv-profile-tls"
        let key = directory + "/key.pem", certificate = directory + "/cert.pem"
        if !FileManager.default.fileExists(atPath: certificate) {
            let command = "mkdir -p \(directory) && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \(key) 2>/dev/null"
                + " && openssl req -x509 -new -key \(key) -out \(certificate) -days 3650 -subj /CN=localhost -addext subjectAltName=DNS:localhost 2>/dev/null"
            _ = system(command)
        }
        return (certificate, key)
    }

    static func configurations() -> (TLSServerConfiguration, TLSClientConfiguration) {
        let (certificate, key) = make()
        do {
            return (try TLSServerConfiguration(certificateChain: .file(certificate), privateKey: .file(key)),
                    try TLSClientConfiguration(trustRoots: .certificates(.file(certificate)), serverName: "localhost"))
        } catch {
            fatalError("TLS configuration: \(error)")
        }
    }
}

/// `count` TLS handshakes one after another on `loop`, server and client ours; the client closes
/// each connection once its handshake finished, the server when it reads that end.
func profileTLSHandshakes(count: Int) {
    let (serverTLS, clientTLS) = TLSProfileFiles.configurations()
    let done = Flag()
    let state = TLSHandshakeCount(count: count)
    loop.execute {
        state.server = TCPServer.serve(port: 0, tls: serverTLS).subscribeNext { event in
            switch event {
            case .listening(let address):
                state.port = address.port
                state.connectNext(clientTLS)
            case .refused, .draining:
                break
            case .accepted(let connection):
                _ = connection.bytes.subscribe(error: { _ in connection.close() }, completed: { connection.close() })
                state.serverDone += 1
                if state.serverDone == count { done.raise() }
            }
        }
    }
    done.wait()
    loop.execute { state.server?.dispose() }
}

final class TLSHandshakeCount: @unchecked Sendable {
    // Touched only on the loop thread.
    let count: Int
    var port = 0
    var opened = 0
    var serverDone = 0
    var server: (any Disposable)?

    init(count: Int) { self.count = count }

    func connectNext(_ tls: TLSClientConfiguration) {
        guard opened < count else { return }
        opened += 1
        _ = TCP.connect(host: "127.0.0.1", port: port, tls: tls).subscribeNext { [self] connection in
            connection.close()
            connectNext(tls)
        }
    }
}

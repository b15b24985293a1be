import Foundation
import Gateway
import HTTPServer
import IAPCore
import TestPKI
import TestSupport
import XCTest

/// The gateway serving HTTPS itself (`tls` in the gateway config), checked with a test CA made by
/// `openssl` and `curl --cacert` over loopback.
final class HTTPSTests: XCTestCase {
    private var directory: URL!
    private var pki: TestTLSFiles!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapgw-tls-\(UUID().uuidString)")
        pki = try TestTLSFiles.make(in: directory)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    func testTheGatewayServesItsAPIOverHTTPSWithTheConfiguredCertificate() async throws {
        let gw = try await GatewayE2E.start(self) { $0.tlsFiles = (self.pki.certificateFile, self.pki.privateKeyFile) }
        XCTAssertTrue(gw.harness.gatewayURL.hasPrefix("https://127.0.0.1:"))

        let health = try ProcessRun.curl(["--cacert", pki.caFile, "\(gw.harness.gatewayURL)/healthz"])
        XCTAssertEqual(health.exit, 0, health.stderr)
        XCTAssertEqual(health.status, 200)
        let nonce = try ProcessRun.curl(["--cacert", pki.caFile, "-H", "Authorization: Bearer \(gw.harness.apiKey)",
                                         "-H", "Content-Type: application/json", "-d", #"{"account":"alice"}"#,
                                         "\(gw.appURL)/nonces"])
        XCTAssertEqual(nonce.status, 200, nonce.body)
        XCTAssertTrue(nonce.body.contains(#""nonce":"#), nonce.body)

        // A client that does not trust the CA, and plain HTTP to the TLS port, get nothing.
        let untrusted = try ProcessRun.curl(["\(gw.harness.gatewayURL)/healthz"])
        XCTAssertEqual(untrusted.exit, 60, "certificate verify failed: \(untrusted.stderr)")
        let plain = try ProcessRun.curl([gw.harness.gatewayURL.replacingOccurrences(of: "https:", with: "http:") + "/healthz"])
        XCTAssertNotEqual(plain.exit, 0)
        XCTAssertNil(plain.status)
    }

    func testMinimumVersionRefusesOlderProtocols() async throws {
        for (minimum, tls12Accepted) in [(HTTPServerTLS.MinimumVersion.tls12, true), (.tls13, false)] {
            let tls = try HTTPServerTLS.load(certificateFile: pki.certificateFile, privateKeyFile: pki.privateKeyFile,
                                             minimumVersion: minimum)
            let server = try HTTPServer(configuration: HTTPServerConfiguration(port: 0, tls: tls)) { _ in .json(200, "{}") }
            try server.start()
            let url = "https://127.0.0.1:\(server.port)/"
            let tls13 = try ProcessRun.curl(["--cacert", pki.caFile, "--tlsv1.3", url])
            let tls12 = try ProcessRun.curl(["--cacert", pki.caFile, "--tlsv1.2", "--tls-max", "1.2", url])
            await server.shutdown(gracePeriod: .zero)
            XCTAssertEqual(tls13.status, 200, "TLS 1.3 with minimum \(minimum): \(tls13.stderr)")
            XCTAssertEqual(tls12.status, tls12Accepted ? 200 : nil, "TLS 1.2 with minimum \(minimum): \(tls12.stderr)")
        }
    }

    func testAChunkedBodyPastTheLimitClosesOnlyThatConnection() async throws {
        let tls = try HTTPServerTLS.load(certificateFile: pki.certificateFile, privateKeyFile: pki.privateKeyFile)
        let server = try HTTPServer(configuration: HTTPServerConfiguration(port: 0, maxBodyBytes: 1_024, tls: tls)) { _ in
            .json(200, "{}")
        }
        try server.start()
        let body = directory.appendingPathComponent("body.json").path
        try String(repeating: "x", count: 64 * 1_024).write(toFile: body, atomically: true, encoding: .utf8)
        let url = "https://127.0.0.1:\(server.port)/"
        let big = try ProcessRun.curl(["--cacert", pki.caFile, "-H", "Transfer-Encoding: chunked", "--data-binary", "@\(body)", url])
        let next = try ProcessRun.curl(["--cacert", pki.caFile, url])
        await server.shutdown(gracePeriod: .zero)
        // Plain HTTP answers 413 on the socket itself; TLS cannot, so the connection is closed instead.
        XCTAssertNotEqual(big.exit, 0, big.body)
        XCTAssertNil(big.status, big.stderr)
        XCTAssertFalse(big.stderr.contains("wrong version number"), "plain bytes written into the TLS stream: \(big.stderr)")
        XCTAssertEqual(next.status, 200, "the server goes on serving: \(next.stderr)")
    }

    func testBadFilesAreRefusedWithASentenceThatNamesTheFaultAndNeverTheContents() throws {
        let garbage = directory.appendingPathComponent("garbage.pem").path
        try "not a certificate\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        let certAsKey = directory.appendingPathComponent("cert-as-key.pem").path
        try FileManager.default.copyItem(atPath: pki.certificateFile, toPath: certAsKey)
        let encrypted = directory.appendingPathComponent("encrypted.key").path
        try TestTLSFiles.openssl(["pkey", "-in", pki.privateKeyFile, "-aes256", "-passout", "pass:secret", "-out", encrypted])
        let readable = directory.appendingPathComponent("readable.key").path
        try FileManager.default.copyItem(atPath: pki.privateKeyFile, toPath: readable)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: readable)
        let truncated = directory.appendingPathComponent("truncated.pem").path
        let pem = try String(contentsOfFile: pki.certificateFile, encoding: .utf8)
        try (String(pem.prefix(200)) + "\n-----END CERTIFICATE-----\n").write(toFile: truncated, atomically: true, encoding: .utf8)

        let cases: [(certificate: String, key: String, says: String)] = [
            (directory.appendingPathComponent("missing.pem").path, pki.privateKeyFile, "cannot be read"),
            (garbage, pki.privateKeyFile, "holds no PEM certificate"),
            (pki.certificateFile, certAsKey, "holds no PEM private key"),
            (pki.certificateFile, encrypted, "is encrypted"),
            (pki.certificateFile, readable, "readable by every user"),
            (pki.certificateFile, pki.otherPrivateKeyFile, "the key does not belong to the certificate"),
            (truncated, pki.privateKeyFile, "refused"),
        ]
        let keyText = try String(contentsOfFile: pki.privateKeyFile, encoding: .utf8)
        for c in cases {
            XCTAssertThrowsError(try HTTPServerTLS.load(certificateFile: c.certificate, privateKeyFile: c.key)) { error in
                let message = (error as? HTTPServerError)?.message ?? ""
                XCTAssertEqual((error as? HTTPServerError)?.kind, .invalidConfiguration)
                XCTAssertTrue(message.contains(c.says), "\(c.says): \(message)")
                XCTAssertFalse(message.lowercased().contains("gnutls"), message)
                for line in keyText.split(separator: "\n") where !line.hasPrefix("-----") {
                    XCTAssertFalse(message.contains(line), "no key material in \(message)")
                }
            }
        }
    }

    func testServeRefusesToStartWithAKeyThatIsNotTheCertificatesAndConfigCheckSaysWhy() throws {
        let config = directory.appendingPathComponent("config")
        try FileManager.default.createDirectory(at: config.appendingPathComponent("apps"), withIntermediateDirectories: true)
        try """
            <gateway>
                <listenPort type="integer">0</listenPort>
                <storageURL>sqlite:\(directory.appendingPathComponent("iapgw.sqlite").path)</storageURL>
                <tls>
                    <certificateFile>\(pki.certificateFile)</certificateFile>
                    <privateKeyFile>\(pki.otherPrivateKeyFile)</privateKeyFile>
                    <minimumVersion>1.3</minimumVersion>
                </tls>
            </gateway>
            """.write(to: config.appendingPathComponent("gateway.xml"), atomically: true, encoding: .utf8)

        let serve = try ProcessRun.run(GatewayProcess.binary.path, ["serve", "--config", config.path,
                                                                    "--mappings", GatewayProcess.mappings.path])
        XCTAssertEqual(serve.status, 1, serve.stderr)
        XCTAssertTrue(serve.stderr.contains("the key does not belong to the certificate"), serve.stderr)
        XCTAssertFalse(serve.stderr.contains("\"listening\""), serve.stderr)

        let check = try ProcessRun.run(GatewayProcess.binary.path, ["config", "check", config.path])
        XCTAssertEqual(check.status, 1)
        XCTAssertTrue(check.stdout.contains("the key does not belong to the certificate"), check.stdout)
    }
}

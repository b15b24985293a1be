import Foundation

/// A throwaway TLS PKI for tests, made by the `openssl` command: a CA and a server certificate for
/// 127.0.0.1 / localhost signed by it (P-256, valid for a day), as PEM files in `directory`.
/// Clients trust `caFile` (`curl --cacert`). Never trusted by anything outside a test.
public struct TestTLSFiles: Sendable {
    public let caFile: String
    public let certificateFile: String
    /// Mode 0600.
    public let privateKeyFile: String
    /// A key of its own, not the certificate's (mode 0600).
    public let otherPrivateKeyFile: String

    public static func make(in directory: URL) throws -> TestTLSFiles {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let d = directory.path
        let ext = directory.appendingPathComponent("server.ext")
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
            .write(to: ext, atomically: true, encoding: .utf8)
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try openssl(["req", "-x509"] + curve + ["-keyout", "\(d)/ca.key", "-out", "\(d)/ca.pem", "-days", "1",
                     "-subj", "/CN=IAPGateway Test TLS CA"])
        try openssl(["req"] + curve + ["-keyout", "\(d)/server.key", "-out", "\(d)/server.csr", "-subj", "/CN=127.0.0.1"])
        try openssl(["x509", "-req", "-in", "\(d)/server.csr", "-CA", "\(d)/ca.pem", "-CAkey", "\(d)/ca.key",
                     "-CAcreateserial", "-out", "\(d)/server.pem", "-days", "1", "-extfile", ext.path])
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(d)/other.key"])
        for key in ["server.key", "other.key", "ca.key"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: "\(d)/\(key)")
        }
        return TestTLSFiles(caFile: "\(d)/ca.pem", certificateFile: "\(d)/server.pem",
                            privateKeyFile: "\(d)/server.key", otherPrivateKeyFile: "\(d)/other.key")
    }

    /// Runs `openssl` with `arguments`; its output is discarded, a failure throws.
    public static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "openssl \(arguments.first ?? "") failed"])
        }
    }
}

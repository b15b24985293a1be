import CMicroHTTPD
import Foundation

/// HTTPS through libmicrohttpd's GnuTLS: the server's PEM certificate chain and private key, and
/// the oldest protocol version offered. `load` checks everything a start could trip over, so a bad
/// file stops the gateway at start with a sentence that names the file and the fault (never its
/// contents, never the TLS library's text).
public struct HTTPServerTLS: Sendable {
    public enum MinimumVersion: String, Sendable { case tls12 = "1.2", tls13 = "1.3" }

    public let minimumVersion: MinimumVersion
    /// NUL-terminated copies handed to libmicrohttpd, alive as long as any server holding them.
    let material: TLSMaterial

    /// Larger than any certificate chain or key; a bigger file is not one.
    static let maxFileBytes = 1 << 20

    public static func load(certificateFile: String, privateKeyFile: String,
                            minimumVersion: MinimumVersion = .tls12) throws(HTTPServerError) -> HTTPServerTLS {
        guard MHD_is_feature_supported(MHD_FEATURE.FEATURE_TLS) == MHD_Result.YES else {
            throw invalid("this libmicrohttpd was built without TLS: serve plain HTTP behind a proxy instead")
        }
        let certificate = try readPEM(certificateFile, role: "certificate")
        guard certificate.contains("-----BEGIN CERTIFICATE-----") else {
            throw invalid("tls certificateFile \(certificateFile) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        let key = try readPEM(privateKeyFile, role: "private key")
        guard key.contains("-----BEGIN "), key.contains("PRIVATE KEY-----") else {
            throw invalid("tls privateKeyFile \(privateKeyFile) holds no PEM private key (-----BEGIN PRIVATE KEY-----)")
        }
        guard !key.contains("ENCRYPTED") else {
            throw invalid("tls privateKeyFile \(privateKeyFile) is encrypted: the gateway starts unattended and needs"
                + " an unencrypted key (protect it with the file's mode instead)")
        }
        // Like ssh with its keys: a key every local user can read is no longer private.
        if let mode = (try? FileManager.default.attributesOfItem(atPath: privateKeyFile))?[.posixPermissions] as? Int,
           mode & 0o004 != 0 {
            throw invalid("tls privateKeyFile \(privateKeyFile) is readable by every user: chmod o-r it (0600 or 0640)")
        }
        let tls = HTTPServerTLS(minimumVersion: minimumVersion,
                                material: TLSMaterial(certificate: certificate, privateKey: key,
                                                      priorities: priorities(minimumVersion)))
        // The library that will serve decides whether it can use them: a daemon with no socket loads them now.
        let probe = withVaList(tls.daemonOptions() + [MHD_OPTION.END.rawValue]) { arguments in
            MHD_start_daemon_va(MHD_USE_TLS.rawValue | MHD_USE_NO_LISTEN_SOCKET.rawValue, 0, nil, nil,
                                probeHandler, nil, arguments)
        }
        guard let probe else {
            throw invalid("the TLS library refused \(certificateFile) with \(privateKeyFile): not PEM it can read,"
                + " or the key does not belong to the certificate")
        }
        MHD_stop_daemon(probe)
        return tls
    }

    /// GnuTLS priorities: its NORMAL set (current ciphers, TLS 1.3 first) from the minimum version up.
    static func priorities(_ minimum: MinimumVersion) -> String {
        switch minimum {
        case .tls12: "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
        case .tls13: "NORMAL:-VERS-ALL:+VERS-TLS1.3"
        }
    }

    /// libmicrohttpd's TLS options (with MHD_USE_TLS among the flags).
    func daemonOptions() -> [CVarArg] {
        [MHD_OPTION.HTTPS_MEM_CERT.rawValue, OpaquePointer(material.certificate),
         MHD_OPTION.HTTPS_MEM_KEY.rawValue, OpaquePointer(material.privateKey),
         MHD_OPTION.HTTPS_PRIORITIES.rawValue, OpaquePointer(material.priorities)]
    }

    private static func readPEM(_ path: String, role: String) throws(HTTPServerError) -> String {
        let name = role == "certificate" ? "certificateFile" : "privateKeyFile"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw invalid("tls \(name) \(path) cannot be read (missing, or not readable by this user)")
        }
        guard data.count <= maxFileBytes, let text = String(data: data, encoding: .utf8) else {
            throw invalid("tls \(name) \(path) is not a PEM \(role) (over 1 MiB, or not text)")
        }
        return text
    }

    private static func invalid(_ message: String) -> HTTPServerError {
        HTTPServerError(kind: .invalidConfiguration, message: message)
    }
}

/// C strings that libmicrohttpd reads while it starts a daemon (and may keep pointing at).
final class TLSMaterial: @unchecked Sendable {
    let certificate: UnsafeMutablePointer<CChar>
    let privateKey: UnsafeMutablePointer<CChar>
    let priorities: UnsafeMutablePointer<CChar>

    init(certificate: String, privateKey: String, priorities: String) {
        self.certificate = strdup(certificate)
        self.privateKey = strdup(privateKey)
        self.priorities = strdup(priorities)
    }

    deinit {
        // The key's bytes are overwritten before the memory goes back.
        memset(privateKey, 0, strlen(privateKey))
        free(certificate)
        free(privateKey)
        free(priorities)
    }
}

/// The probe daemon never has a connection; libmicrohttpd still requires a handler.
private let probeHandler: MHD_AccessHandlerCallback = { _, _, _, _, _, _, _, _ in MHD_Result.NO }

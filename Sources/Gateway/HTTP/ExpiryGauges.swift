import AppleTrust
import Foundation
import IAPConfig
import IAPCore

/// The dates a person must act before, as `/metrics` gauges (seconds since 1970, what Prometheus's
/// `time()` compares with): each app's pinned trust roots, the TLS certificate chain the server
/// presents, and each In-App Purchase key's `retiresAt` (Apple's `.p8` keys carry no expiry of
/// their own). Read once, when the gateway is assembled: these are the files it loaded, and a new
/// one takes a restart. A file that cannot be read or parsed is left out (readiness reports it).
/// Labels are configured bundle ids and fixed words only: never a path.
enum ExpiryGauges {
    static func text(apps: [String: AppPolicy], tlsCertificateFile: URL?) -> String {
        var out = "# HELP iapgw_trust_root_expiry_timestamp_seconds When the earliest pinned trust root of an app expires.\n"
        out += "# TYPE iapgw_trust_root_expiry_timestamp_seconds gauge\n"
        for app in apps.values.sorted(by: { $0.bundleId < $1.bundleId }) {
            for (purpose, files) in [("jws", app.trustRoots.jws), ("receipts", app.trustRoots.receipts)] {
                let dates = files.compactMap { file in (try? Data(contentsOf: file)).flatMap(notAfter(der:)) }
                guard let earliest = dates.min() else { continue }
                out += "iapgw_trust_root_expiry_timestamp_seconds{app=\"\(app.bundleId)\",purpose=\"\(purpose)\"} \(earliest)\n"
            }
        }
        if let tlsCertificateFile, let pem = try? String(contentsOf: tlsCertificateFile, encoding: .utf8),
           let earliest = pemCertificates(pem).compactMap(notAfter(der:)).min() {
            out += "# HELP iapgw_tls_certificate_expiry_timestamp_seconds When the first certificate of the served TLS chain expires.\n"
            out += "# TYPE iapgw_tls_certificate_expiry_timestamp_seconds gauge\n"
            out += "iapgw_tls_certificate_expiry_timestamp_seconds \(earliest)\n"
        }
        out += "# HELP iapgw_inapp_purchase_key_retirement_timestamp_seconds When an app's In-App Purchase key is to be replaced (its retiresAt).\n"
        out += "# TYPE iapgw_inapp_purchase_key_retirement_timestamp_seconds gauge\n"
        for app in apps.values.sorted(by: { $0.bundleId < $1.bundleId }) {
            for (use, key) in [("serverAPI", app.serverAPI), ("offerSigning", app.offerSigning)] {
                guard let retiresAt = key?.retiresAt else { continue }
                out += "iapgw_inapp_purchase_key_retirement_timestamp_seconds{app=\"\(app.bundleId)\",use=\"\(use)\"} \(retiresAt / 1000)\n"
            }
        }
        return out
    }

    private static func notAfter(der: Data) -> Int64? {
        (try? X509Certificate(der: der))?.notAfter
    }

    /// The DER of each `CERTIFICATE` block of a PEM file, in order.
    static func pemCertificates(_ pem: String) -> [Data] {
        var certificates: [Data] = []
        var body: String?
        for line in pem.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----" {
                if let text = body, let der = Data(base64Encoded: text) { certificates.append(der) }
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        return certificates
    }
}

import COpenSSL
import Foundation
import IAPCore

/// Asks each certificate's OCSP responder (from its AIA extension) whether it is revoked, and
/// checks the answer with OpenSSL: signed by the issuer or its delegate, chaining to a pinned root,
/// fresh, and about this certificate. It asks about every certificate of leaf → … → root but the
/// root, leaf first. Async: the request is awaited on `OCSPTransport`, and the OpenSSL work on
/// either side of it runs between suspensions (its error queue is per thread).
struct OCSPRevocationCheck: Sendable {
    let transport: any OCSPTransport
    /// Whose pinned store OCSP answers must chain to.
    let pinned: PinnedChainPolicy
    var timeout: Duration = .seconds(5)
    static let clockSkewSeconds = 300
    /// Apple's responders refresh answers within hours; a week-old "good" is not evidence.
    static let maxResponseAgeSeconds = 7 * 86_400

    func check(_ chain: [X509Certificate]) async throws(VerificationError) {
        for (cert, issuer) in zip(chain, chain.dropFirst()) { try await check(cert, issuer: issuer) }
    }

    func check(_ cert: X509Certificate, issuer: X509Certificate) async throws(VerificationError) {
        guard let urlText = cert.ocspResponderURL, let url = URL(string: urlText),
              url.scheme == "http" || url.scheme == "https" else {
            throw VerificationError(.revocationCheckUnavailable, "\(cert.subjectCommonName) names no OCSP responder")
        }
        let body = try request(about: cert, issuer: issuer)
        let answer = try await transport.post(body, to: url, timeout: timeout)
        try judge(answer, about: cert, issuer: issuer)
    }

    /// The DER OCSP request for `cert`.
    func request(about cert: X509Certificate, issuer: X509Certificate) throws(VerificationError) -> Data {
        defer { clearOpenSSLErrors() }
        guard let request = OCSP_REQUEST_new() else { throw unavailable("cannot build OCSP request") }
        defer { OCSP_REQUEST_free(request) }
        // The request takes ownership of the id.
        guard let id = OCSP_cert_to_id(EVP_sha1(), cert.x509, issuer.x509) else {
            throw unavailable("cannot build OCSP certificate id")
        }
        guard OCSP_request_add0_id(request, id) != nil else { OCSP_CERTID_free(id); throw unavailable("cannot build OCSP request") }
        var derPtr: UnsafeMutablePointer<UInt8>? = nil
        let derLen = i2d_OCSP_REQUEST(request, &derPtr)
        guard derLen > 0, let derPtr else { throw unavailable("cannot encode OCSP request") }
        defer { CRYPTO_free(derPtr, nil, 0) }
        return Data(bytes: derPtr, count: Int(derLen))
    }

    /// Whether `answer` says, verifiably and freshly, that `cert` is good.
    func judge(_ answer: Data, about cert: X509Certificate, issuer: X509Certificate) throws(VerificationError) {
        defer { clearOpenSSLErrors() }
        guard let lookupId = OCSP_cert_to_id(EVP_sha1(), cert.x509, issuer.x509) else {
            throw unavailable("cannot build OCSP certificate id")
        }
        defer { OCSP_CERTID_free(lookupId) }
        let response: OpaquePointer? = answer.withUnsafeBytes { raw in
            var p = raw.bindMemory(to: UInt8.self).baseAddress
            return d2i_OCSP_RESPONSE(nil, &p, raw.count)
        }
        guard let response else { throw unavailable("OCSP response does not parse") }
        defer { OCSP_RESPONSE_free(response) }
        guard OCSP_response_status(response) == OCSP_RESPONSE_STATUS_SUCCESSFUL,
              let basic = OCSP_response_get1_basic(response) else {
            throw unavailable("OCSP responder did not answer successfully")
        }
        defer { OCSP_BASICRESP_free(basic) }
        guard let certs = iapgw_sk_X509_new_null() else { throw unavailable("out of memory") }
        defer { iapgw_sk_X509_free(certs) }
        _ = iapgw_sk_X509_push(certs, issuer.x509)
        guard OCSP_basic_verify(basic, certs, pinned.storeForOCSP, 0) == 1 else {
            throw unavailable("OCSP response signature does not verify")
        }
        var status: Int32 = -1, reason: Int32 = -1
        var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil, nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
        var revokedAt: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
        guard OCSP_resp_find_status(basic, lookupId, &status, &reason, &revokedAt, &thisUpdate, &nextUpdate) == 1 else {
            throw unavailable("OCSP response does not mention the certificate")
        }
        // maxsec bounds thisUpdate's age: without it an answer with no nextUpdate stays "fresh"
        // forever, and a captured "good" could be replayed after the certificate is revoked.
        guard OCSP_check_validity(thisUpdate, nextUpdate, Self.clockSkewSeconds, Self.maxResponseAgeSeconds) == 1 else {
            throw unavailable("OCSP response is stale")
        }
        switch status {
        case V_OCSP_CERTSTATUS_GOOD: return
        case V_OCSP_CERTSTATUS_REVOKED:
            throw VerificationError(.certificateRevoked, "\(cert.subjectCommonName) is revoked")
        default: throw unavailable("OCSP responder does not know the certificate")
        }
    }

    private func unavailable(_ why: String) -> VerificationError { VerificationError(.revocationCheckUnavailable, why) }
}

@_spi(TestPKI) import AppleTrust
import COpenSSL
import Foundation
import IAPCore

extension TestPKI {
    /// An in-process OCSP responder for the test PKI: answers a DER OCSP request for certificates
    /// issued by the CA, signed by the issuer itself (as a CA may), "revoked" for the listed ones.
    /// Plug it into `SignedDataVerifier` through an `OCSPTransport` to test online checks offline.
    public struct OCSPResponder: Sendable {
        public let authority: CertificateAuthority
        public var revoked: [X509Certificate]
        /// How long before now `thisUpdate` says the answer was produced (a replayed answer is old).
        public var thisUpdateAge: TimeInterval = 60
        /// `nextUpdate` after now; nil leaves it out (OCSP then promises no freshness at all).
        public var nextUpdateIn: TimeInterval? = 3600
        /// Answers "unknown" for every certificate.
        public var answersUnknown = false
        /// Signs with this identity instead of the certificate's issuer (a wrong responder).
        public var signedBy: Identity? = nil

        public init(authority: CertificateAuthority, revoked: [X509Certificate] = []) {
            self.authority = authority
            self.revoked = revoked
        }

        public func respond(to requestDER: Data) throws(VerificationError) -> Data {
            let request: OpaquePointer? = requestDER.withUnsafeBytes { raw in
                var p = raw.bindMemory(to: UInt8.self).baseAddress
                return d2i_OCSP_REQUEST(nil, &p, raw.count)
            }
            guard let request, OCSP_request_onereq_count(request) == 1,
                  let one = OCSP_request_onereq_get0(request, 0), let id = OCSP_onereq_get0_id(one) else {
                throw VerificationError(.revocationCheckUnavailable, "test responder: bad request")
            }
            defer { OCSP_REQUEST_free(request) }
            // The certificate asked about decides who signs: its issuer (root for the intermediate).
            let signer = signedBy
                ?? (Self.matches(authority.intermediate.certificate, issuer: authority.root, id) ? authority.root : authority.intermediate)
            let isRevoked = revoked.contains { r in
                [authority.root, authority.intermediate].contains { Self.matches(r, issuer: $0, id) }
            }
            guard let basic = OCSP_BASICRESP_new() else { throw VerificationError(.revocationCheckUnavailable, "test responder") }
            defer { OCSP_BASICRESP_free(basic); ERR_clear_error() }
            let now = time(nil)
            let thisUpdate = ASN1_TIME_set(nil, now - time_t(thisUpdateAge))
            let nextUpdate = nextUpdateIn.map { ASN1_TIME_set(nil, now + time_t($0)) } ?? nil
            let revokedAt = ASN1_TIME_set(nil, now - 3600)
            defer { ASN1_STRING_free(thisUpdate); ASN1_STRING_free(nextUpdate); ASN1_STRING_free(revokedAt) }
            let status = answersUnknown ? V_OCSP_CERTSTATUS_UNKNOWN : isRevoked ? V_OCSP_CERTSTATUS_REVOKED : V_OCSP_CERTSTATUS_GOOD
            guard OCSP_basic_add1_status(basic, id, status,
                                         status == V_OCSP_CERTSTATUS_REVOKED ? OCSP_REVOKED_STATUS_KEYCOMPROMISE : -1,
                                         status == V_OCSP_CERTSTATUS_REVOKED ? revokedAt : nil, thisUpdate, nextUpdate) != nil,
                  OCSP_basic_sign(basic, signer.certificate.x509Handle, signer.key.evpPKey, EVP_sha256(), nil, 0) == 1,
                  let response = OCSP_response_create(OCSP_RESPONSE_STATUS_SUCCESSFUL, basic) else {
                throw VerificationError(.revocationCheckUnavailable, "test responder: cannot sign")
            }
            defer { OCSP_RESPONSE_free(response) }
            var out: UnsafeMutablePointer<UInt8>? = nil
            let n = i2d_OCSP_RESPONSE(response, &out)
            guard n > 0, let out else { throw VerificationError(.revocationCheckUnavailable, "test responder: encode") }
            defer { CRYPTO_free(out, nil, 0) }
            return Data(bytes: out, count: Int(n))
        }

        private static func matches(_ cert: X509Certificate, issuer: Identity, _ id: OpaquePointer) -> Bool {
            guard let cid = OCSP_cert_to_id(EVP_sha1(), cert.x509Handle, issuer.certificate.x509Handle) else { return false }
            defer { OCSP_CERTID_free(cid) }
            return OCSP_id_cmp(cid, id) == 0
        }
    }
}

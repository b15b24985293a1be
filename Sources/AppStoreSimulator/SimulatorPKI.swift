@_spi(TestPKI) import AppleTrust
import COpenSSL
import Foundation
import IAPCore
import TestPKI

/// The simulator's one chain of trust: the same leaf signs JWS (transactions, renewal info,
/// notifications) and PKCS#7 receipts, so a gateway pins one root for both generations.
public struct SimulatorPKI: Sendable {
    public let authority: TestPKI.CertificateAuthority
    public let leaf: TestPKI.Identity
    public let jwsSigner: TestPKI.JWSSigner

    /// `validity` bounds the root and intermediate, `leafValidity` the signing leaf (wider for a
    /// fuzzer that signs payloads dated years back).
    public init(validity: TestPKI.Validity = .around(days: 3650),
                leafValidity: TestPKI.Validity = .around(days: 365)) throws(VerificationError) {
        let authority = try TestPKI.CertificateAuthority.make(rootName: "IAPGateway Simulator Root CA", validity: validity)
        let leaf = try authority.issueLeaf(validity: leafValidity, commonName: "IAPGateway Simulator StoreKit Signing")
        self.authority = authority
        self.leaf = leaf
        self.jwsSigner = authority.signer(leaf: leaf)
    }

    /// The root to pin (receipts and JWS alike).
    public var rootCertificateDER: Data { authority.root.der }

    /// Writes the root as DER, the form configs load with `trustRoots`.
    public func writeTrustRoot(to url: URL) throws {
        try rootCertificateDER.write(to: url, options: .atomic)
    }

    /// PKCS#7 SignedData over `content` (attached), signed by the leaf with SHA-256 and carrying
    /// leaf and intermediate, as Apple's receipts do.
    public func signPKCS7(_ content: [UInt8]) throws -> [UInt8] {
        defer { ERR_clear_error() }
        guard let bio = BIO_new(BIO_s_mem()) else { throw SimulatorError("BIO_new failed") }
        defer { BIO_free(bio) }
        let written = content.withUnsafeBufferPointer { BIO_write(bio, $0.baseAddress, Int32($0.count)) }
        guard written == Int32(content.count) else { throw SimulatorError("BIO_write failed") }
        guard let extra = iapgw_sk_X509_new_null() else { throw SimulatorError("allocation failed") }
        defer { iapgw_sk_X509_free(extra) }
        let intermediate = authority.intermediate.certificate
        return try withExtendedLifetime((intermediate, leaf)) { () throws -> [UInt8] in
            _ = iapgw_sk_X509_push(extra, intermediate.x509Handle)
            let flags = Int32(PKCS7_BINARY | PKCS7_NOSMIMECAP)
            guard let p7 = PKCS7_sign(leaf.certificate.x509Handle, leaf.key.evpPKey, extra, bio, flags) else {
                throw SimulatorError("PKCS7_sign failed")
            }
            defer { PKCS7_free(p7) }
            let length = i2d_PKCS7(p7, nil)
            guard length > 0 else { throw SimulatorError("i2d_PKCS7 failed") }
            var out = [UInt8](repeating: 0, count: Int(length))
            out.withUnsafeMutableBufferPointer { buffer in
                var p: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
                _ = i2d_PKCS7(p7, &p)
            }
            return out
        }
    }

    func signJWS(_ payload: JSONValue) throws(VerificationError) -> String {
        try jwsSigner.sign(payload)
    }
}

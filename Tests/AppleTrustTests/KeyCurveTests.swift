import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// ES256 means P-256 by name (Apple's libraries load every ES256 key as CryptoKit's `P256`):
/// another 256-bit curve, or P-256 spelled out as explicit parameters, is refused wherever a key
/// comes from outside, however validly it signed.
final class KeyCurveTests: XCTestCase {
    /// A pinned chain whose leaf certifies `key`, and a transaction that key signed.
    private func token(leafKey key: ECPrivateKey) throws -> String {
        let leaf = try Fixture.ca.issueLeaf(validity: .around(Fixture.now, days: 30), key: key)
        return try Fixture.ca.signer(leaf: leaf).sign(Fixture.transaction())
    }

    private func assertLeafRefused(curve: String, explicitParameters: Bool = false, as code: VerificationError.Code = .invalidSignature,
                                   because reason: String = "named curve P-256",
                                   file: StaticString = #filePath, line: UInt = #line) throws {
        let jws = try token(leafKey: TestPKI.ecKey(curve: curve, explicitParameters: explicitParameters))
        XCTAssertThrowsError(try Fixture.verifier().verifyAndDecodeTransaction(jws), file: file, line: line) { error in
            let refusal = error as? VerificationError
            XCTAssertEqual(refusal?.code, code, "\(error)", file: file, line: line)
            // Refused for its curve, not because the signature failed: the leaf's key did sign it.
            XCTAssertTrue(refusal?.message.contains(reason) == true, "\(error)", file: file, line: line)
        }
    }

    func testLeafOnSecp256k1WithAValidSignatureIsRefused() throws {
        try assertLeafRefused(curve: "secp256k1")
    }

    func testLeafOnBrainpoolP256r1WithAValidSignatureIsRefused() throws {
        try assertLeafRefused(curve: "brainpoolP256r1")
    }

    /// OpenSSL 3's chain building already refuses explicit parameters in any certificate of the
    /// chain (X509_V_ERR_EC_KEY_EXPLICIT_PARAMS), before the leaf key is looked at.
    func testLeafWithP256GivenAsExplicitParametersIsRefusedByTheChain() throws {
        try assertLeafRefused(curve: "prime256v1", explicitParameters: true, as: .invalidCertificateChain, because: "explicit ECC parameters")
    }

    func testLeafOnNamedP256FromTheSameHookIsAccepted() throws {
        let jws = try token(leafKey: TestPKI.ecKey(curve: "prime256v1"))
        XCTAssertEqual(try Fixture.verifier().verifyAndDecodeTransaction(jws).transactionId, "2000000000000001")
    }

    /// A pinned root that signed an intermediate on `curve`, which signed a P-256 leaf's token.
    private func token(intermediateCurve curve: String, rootCurve: ECPrivateKey.Curve = .p384) throws -> (String, [Data]) {
        let ca = try TestPKI.CertificateAuthority.make(rootCurve: rootCurve, intermediateKey: TestPKI.ecKey(curve: curve))
        let leaf = try ca.issueLeaf(validity: .around(Fixture.now, days: 30))
        return (try ca.signer(leaf: leaf).sign(Fixture.transaction()), [ca.root.der])
    }

    func testIntermediateOnSecp256k1OrBrainpoolIsRefusedThoughEverySignatureVerifies() throws {
        for curve in ["secp256k1", "brainpoolP256r1", "brainpoolP384r1"] {
            let (jws, roots) = try token(intermediateCurve: curve)
            XCTAssertThrowsError(try Fixture.verifier(roots: roots).verifyAndDecodeTransaction(jws), curve) { error in
                XCTAssertEqual((error as? VerificationError)?.code, .invalidCertificateChain, "\(error)")
                XCTAssertTrue((error as? VerificationError)?.message.contains("P-384 or P-256") == true, "\(error)")
            }
        }
    }

    func testIntermediateOnP384OrP256ByNameIsAccepted() throws {
        for curve in ["secp384r1", "prime256v1"] {
            let (jws, roots) = try token(intermediateCurve: curve)
            XCTAssertEqual(try Fixture.verifier(roots: roots).verifyAndDecodeTransaction(jws).transactionId, "2000000000000001", curve)
        }
    }

    /// The .p8 of the App Store Server API, promotional offers and retention messages.
    func testPrivateKeysOffP256ByNameAreRefusedAtLoad() throws {
        for (curve, explicit) in [("secp256k1", false), ("brainpoolP256r1", false), ("prime256v1", true)] {
            let pem = try TestPKI.ecKey(curve: curve, explicitParameters: explicit).pkcs8PEM
            XCTAssertThrowsError(try ECPrivateKey(pkcs8PEM: pem), "\(curve) explicit: \(explicit)") { error in
                XCTAssertEqual((error as? VerificationError)?.code, .invalidConfiguration, "\(error)")
            }
        }
        XCTAssertNoThrow(try ECPrivateKey(pkcs8PEM: TestPKI.ecKey(curve: "prime256v1").pkcs8PEM))
    }
}

import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

final class AppStoreServerAPITokenTests: XCTestCase {
    final class Clock: @unchecked Sendable { var now = Date(timeIntervalSince1970: 1_760_000_000) }

    func testTokenHasApplesHeaderAndClaimsAndVerifiesWithThePublicKey() throws {
        let key = try ECPrivateKey.generate(.p256)
        let signer = try AppStoreServerAPIToken(privateKeyPEM: key.pkcs8PEM, keyId: "ABC123DEFG", issuerId: "57246542-96fe-1a63-e053-0824d011072a",
                                                bundleId: "com.example.iapgw", lifetime: 1200, now: { Date(timeIntervalSince1970: 1_760_000_000) })
        let token = try signer.token()
        let parts = token.split(separator: ".").map(String.init)
        XCTAssertEqual(parts.count, 3)
        let header = try StrictJSON().parse(try Base64URL.decode(parts[0]))
        XCTAssertEqual(header, .object(["alg": .string("ES256"), "kid": .string("ABC123DEFG"), "typ": .string("JWT")]))
        let claims = try StrictJSON().parse(try Base64URL.decode(parts[1]))
        XCTAssertEqual(claims["iss"], .string("57246542-96fe-1a63-e053-0824d011072a"))
        XCTAssertEqual(claims["aud"], .string("appstoreconnect-v1"))
        XCTAssertEqual(claims["bid"], .string("com.example.iapgw"))
        XCTAssertEqual(claims["iat"], .int(1_760_000_000))
        XCTAssertEqual(claims["exp"], .int(1_760_001_200))
        let signature = try Base64URL.decode(parts[2])
        XCTAssertTrue(key.publicKey.verifyES256(signature: signature, message: Array((parts[0] + "." + parts[1]).utf8)))
        XCTAssertFalse(try ECPrivateKey.generate().publicKey.verifyES256(signature: signature, message: Array((parts[0] + "." + parts[1]).utf8)))
    }

    func testTokenIsReusedUntilShortlyBeforeExpiry() throws {
        let clock = Clock()
        let signer = try AppStoreServerAPIToken(privateKeyPEM: try ECPrivateKey.generate().pkcs8PEM, keyId: "K", issuerId: "I",
                                                bundleId: "b", lifetime: 600, refreshMargin: 60, now: { clock.now })
        let first = try signer.token()
        clock.now += 500
        XCTAssertEqual(try signer.token(), first)
        clock.now += 50  // 50 s left: inside the refresh margin
        XCTAssertNotEqual(try signer.token(), first)
    }

    func testLifetimeOverAnHourIsRefused() throws {
        let pem = try ECPrivateKey.generate().pkcs8PEM
        XCTAssertThrowsError(try AppStoreServerAPIToken(privateKeyPEM: pem, keyId: "K", issuerId: "I", bundleId: "b", lifetime: 3601)) {
            XCTAssertEqual(($0 as? VerificationError)?.code, .invalidConfiguration)
        }
    }

    func testNonP256OrGarbageKeysAreRefusedWithoutEchoingTheKey() throws {
        let p384 = try ECPrivateKey.generate(.p384).pkcs8PEM
        XCTAssertThrowsError(try ECPrivateKey(pkcs8PEM: p384)) { XCTAssertEqual(($0 as? VerificationError)?.code, .invalidConfiguration) }
        let garbage = "-----BEGIN PRIVATE KEY-----\nU0VDUkVUU0VDUkVU\n-----END PRIVATE KEY-----\n"
        XCTAssertThrowsError(try ECPrivateKey(pkcs8PEM: garbage)) { error in
            XCTAssertFalse("\(error)".contains("U0VDUkVU"))
        }
    }
}

final class ECPrivateKeyTests: XCTestCase {
    func testDerivedPublicKeyVerifiesWhatThePrivateKeySignedAndNothingElse() throws {
        let key = try ECPrivateKey.generate()
        let message = Array("iapgw".utf8)
        let signature = try key.signES256(message)
        XCTAssertTrue(try key.derivePublicKey().verifyES256(signature: signature, message: message))
        XCTAssertFalse(try ECPrivateKey.generate().derivePublicKey().verifyES256(signature: signature, message: message))
    }
}

final class EncryptedKeyTests: XCTestCase {
    func assertRefusedAsEncrypted(_ pem: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(pem.contains("ENCRYPTED"), file: file, line: line)
        XCTAssertThrowsError(try ECPrivateKey(pkcs8PEM: pem), file: file, line: line) { error in
            let e = error as? VerificationError
            XCTAssertEqual(e?.code, .invalidConfiguration, file: file, line: line)
            XCTAssertTrue(e?.message.contains("encrypted") == true, "\(error)", file: file, line: line)
            XCTAssertFalse(e?.message.contains("hunter2") == true, file: file, line: line)
        }
    }

    func testEncryptedPKCS8KeyIsRefusedWithoutAPasswordPrompt() throws {
        assertRefusedAsEncrypted(try TestPKI.encryptedPEM(try ECPrivateKey.generate(), password: "hunter2"))
    }

    func testEncryptedTraditionalECKeyIsRefusedWithoutAPasswordPrompt() throws {
        assertRefusedAsEncrypted(try TestPKI.encryptedPEM(try ECPrivateKey.generate(), password: "hunter2", traditional: true))
    }

    func testUnencryptedKeyStillLoads() throws {
        let key = try ECPrivateKey.generate()
        XCTAssertNoThrow(try ECPrivateKey(pkcs8PEM: key.pkcs8PEM))
    }
}

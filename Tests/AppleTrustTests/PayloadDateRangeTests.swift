import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// Dates outside 1970...2109 (ms) are refused before any arithmetic: Int64.min once trapped the
/// process in the seconds conversion, which a forged token reached before its chain was checked.
final class PayloadDateRangeTests: XCTestCase {
    static let insane: [Int64] = [.min, .max, -1, 1 << 53]

    func testForgedTransactionWithAnExtremeSignedDateIsRefusedWithoutTrapping() throws {
        let foreign = try TestPKI.CertificateAuthority.make()
        let leaf = try foreign.issueLeaf(validity: .around(Fixture.now, days: 30))
        for value in Self.insane {
            let jws = try foreign.signer(leaf: leaf).sign(Fixture.transaction(["signedDate": .int(value)]))
            // The chain is judged before the date is read: foreign, and never a trap.
            assertRefused(.untrustedRoot) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
        }
    }

    func testGenuineTransactionWithAnExtremeSignedDateIsAnInvalidField() throws {
        for value in Self.insane {
            let jws = try Fixture.signer.sign(Fixture.transaction(["signedDate": .int(value)]))
            assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
        }
    }

    func testExtremeExpiresAndPurchaseDatesAreInvalidFields() throws {
        for field in ["expiresDate", "purchaseDate", "originalPurchaseDate", "revocationDate"] {
            for value in Self.insane {
                let jws = try Fixture.signer.sign(Fixture.transaction([field: .int(value)]))
                assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeTransaction(jws) }
            }
        }
    }

    func testExtremeRenewalDatesAreInvalidFields() throws {
        for field in ["signedDate", "renewalDate", "gracePeriodExpiresDate", "recentSubscriptionStartDate"] {
            for value in Self.insane {
                let jws = try Fixture.signer.sign(Fixture.renewalInfo([field: .int(value)]))
                assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeRenewalInfo(jws) }
            }
        }
    }

    func testExtremeReceiptCreationDateIsAnInvalidField() throws {
        for value in Self.insane {
            let app: JSONValue = .object([
                "receiptType": "Sandbox", "bundleId": .string(Fixture.bundleId), "appAppleId": .int(Fixture.appAppleId),
                "receiptCreationDate": .int(value), "originalPurchaseDate": .int(Fixture.nowMs - 10_000),
            ])
            let jws = try Fixture.signer.sign(app)
            assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeAppTransaction(jws) }
        }
    }

    func testExtremeNotificationSignedDateIsAnInvalidField() throws {
        let inner = try Fixture.signer.sign(Fixture.transaction())
        for value in Self.insane {
            guard case .object(var n) = Fixture.notification(data: Fixture.notificationData(transaction: inner)) else { return XCTFail() }
            n["signedDate"] = .int(value)
            let jws = try Fixture.signer.sign(.object(n))
            assertRefused(.invalidFieldType) { try Fixture.verifier().verifyAndDecodeNotification(jws) }
        }
    }

    func testHugeClockSkewAndAClockAtTheEndOfTimeDoNotTrap() throws {
        let jws = try Fixture.signer.sign(Fixture.transaction())
        for clock in [Date(timeIntervalSince1970: 1e300), Date(timeIntervalSince1970: -1e300)] {
            let v = try SignedDataVerifier(rootCertificates: [Fixture.ca.root.der], bundleId: Fixture.bundleId, appAppleId: nil,
                                           environments: [.sandbox], clockSkewMs: .max, now: { clock })
            _ = try? v.verifyAndDecodeTransaction(jws)
        }
        let skewed = try SignedDataVerifier(rootCertificates: [Fixture.ca.root.der], bundleId: Fixture.bundleId, appAppleId: nil,
                                            environments: [.sandbox], clockSkewMs: .max, now: { Fixture.now })
        XCTAssertEqual(try skewed.verifyAndDecodeTransaction(jws).transactionId, "2000000000000001")
    }
}

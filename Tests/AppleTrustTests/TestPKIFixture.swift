import AppleTrust
import Foundation
import IAPCore
import TestPKI
import XCTest

/// One private PKI per test process (key generation is the slow part), plus payload builders.
enum Fixture {
    static let now = Date(timeIntervalSince1970: 1_760_000_000)  // 2025-10-09
    static var nowMs: Int64 { Int64(now.timeIntervalSince1970 * 1000) }
    static let bundleId = "com.example.iapgw"
    static let appAppleId: Int64 = 1234567890

    static let ca: TestPKI.CertificateAuthority = try! .make()
    static let leaf: TestPKI.Identity = try! ca.issueLeaf(validity: .around(now, days: 365))
    static var signer: TestPKI.JWSSigner { ca.signer(leaf: leaf) }

    static func verifier(environments: Set<AppStoreEnvironment> = [.sandbox, .production], appAppleId: Int64? = appAppleId,
                         allowLocal: Bool = false, online: Bool = false, cacheCapacity: Int = 64,
                         roots: [Data] = [ca.root.der]) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: roots, bundleId: bundleId, appAppleId: appAppleId,
                               environments: environments, enableOnlineChecks: online,
                               allowLocalTestEnvironments: allowLocal, now: { now }, cacheCapacity: cacheCapacity,
                               ocspTransport: UnreachableOCSPTransport())
    }

    /// A verifier for Apple's real sandbox transaction (`AppleRealVectors`), pinned to Apple Root G3.
    static func realSandboxVerifier(cacheCapacity: Int, signatureMemoCapacity: Int = 128) throws -> SignedDataVerifier {
        try SignedDataVerifier(rootCertificates: [AppleRealVectors.data(AppleRealVectors.appleRootG3)], bundleId: "com.goodheartapp",
                               appAppleId: nil, environments: [.sandbox], cacheCapacity: cacheCapacity,
                               signatureMemoCapacity: signatureMemoCapacity)
    }

    static func transaction(_ overrides: [String: JSONValue] = [:]) -> JSONValue {
        var t: [String: JSONValue] = [
            "transactionId": "2000000000000001", "originalTransactionId": "2000000000000001",
            "bundleId": .string(bundleId), "productId": "pro.monthly", "purchaseDate": .int(nowMs - 60_000),
            "originalPurchaseDate": .int(nowMs - 60_000), "quantity": 1, "type": "Auto-Renewable Subscription",
            "inAppOwnershipType": "PURCHASED", "signedDate": .int(nowMs - 1_000), "environment": "Sandbox",
            "transactionReason": "PURCHASE", "storefront": "USA", "price": 4990, "currency": "USD",
        ]
        for (k, v) in overrides { if v == .null { t.removeValue(forKey: k) } else { t[k] = v } }
        return .object(t)
    }

    static func renewalInfo(_ overrides: [String: JSONValue] = [:]) -> JSONValue {
        var r: [String: JSONValue] = [
            "originalTransactionId": "2000000000000001", "autoRenewProductId": "pro.monthly",
            "productId": "pro.monthly", "autoRenewStatus": 1, "signedDate": .int(nowMs - 1_000), "environment": "Sandbox",
        ]
        for (k, v) in overrides { r[k] = v }
        return .object(r)
    }

    static func notification(type: String = "DID_RENEW", data: [String: JSONValue]) -> JSONValue {
        .object([
            "notificationType": .string(type), "notificationUUID": "6d0f8a6c-0000-4000-8000-000000000001",
            "version": "2.0", "signedDate": .int(nowMs - 500), "data": .object(data),
        ])
    }

    static func notificationData(transaction: String?, renewal: String? = nil, environment: String = "Sandbox") -> [String: JSONValue] {
        var d: [String: JSONValue] = ["bundleId": .string(bundleId), "appAppleId": .int(appAppleId), "environment": .string(environment)]
        if let transaction { d["signedTransactionInfo"] = .string(transaction) }
        if let renewal { d["signedRenewalInfo"] = .string(renewal) }
        return d
    }
}

func assertRefused<T>(_ code: VerificationError.Code, file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> T) {
    XCTAssertThrowsError(try body(), file: file, line: line) { error in
        XCTAssertEqual((error as? VerificationError)?.code, code, "\(error)", file: file, line: line)
    }
}

/// Replaces one of the three segments of a compact JWS.
func replacingSegment(_ jws: String, _ index: Int, with segment: String) -> String {
    var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    parts[index] = segment
    return parts.joined(separator: ".")
}

func segment(_ jws: String, _ index: Int) -> String {
    String(jws.split(separator: ".", omittingEmptySubsequences: false)[index])
}

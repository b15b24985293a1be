import Foundation
import IAPCore

/// Apple's JWS payloads (JWSTransactionDecodedPayload, JWSRenewalInfoDecodedPayload), camelCase
/// with integer millisecond dates, omitting absent fields as Apple does.
enum SignedPayloads {
    /// Apple's AppTransaction (StoreKit 2 `AppTransaction.shared`, Get App Transaction Info).
    static func appTransaction(app: SimulatedApp, environment: AppStoreEnvironment, appTransactionId: String,
                               purchase: AppPurchase, signedDate: Int64) -> JSONValue {
        var o: [String: JSONValue] = [
            "receiptType": .string(environment.rawValue), "bundleId": .string(app.bundleId),
            "applicationVersion": .string(app.bundleVersion), "versionExternalIdentifier": .int(0),
            "receiptCreationDate": .int(signedDate), "signedDate": .int(signedDate),
            "originalPurchaseDate": .int(purchase.originalPurchaseDate),
            "originalApplicationVersion": .string(purchase.originalApplicationVersion),
            "appTransactionId": .string(appTransactionId), "originalPlatform": .string("iOS"),
        ]
        if environment == .production { o["appAppleId"] = .int(app.appAppleId) }
        return .object(o)
    }

    static func transaction(_ t: TransactionRecord, signedDate: Int64) -> JSONValue {
        var o: [String: JSONValue] = [
            "transactionId": .string(t.transactionId),
            "originalTransactionId": .string(t.originalTransactionId),
            "bundleId": .string(t.bundleId),
            "productId": .string(t.productId),
            "purchaseDate": .int(t.purchaseDate),
            "originalPurchaseDate": .int(t.originalPurchaseDate),
            "quantity": .int(t.quantity),
            "type": .string(t.type.rawValue),
            "inAppOwnershipType": .string(t.ownership.rawValue),
            "signedDate": .int(signedDate),
            "environment": .string(t.environment.rawValue),
            "transactionReason": .string(t.transactionReason.rawValue),
            "storefront": .string(t.storefront),
            "storefrontId": .string(t.storefrontId),
            "price": .int(t.price),
            "currency": .string(t.currency),
            "appTransactionId": .string(t.appTransactionId),
        ]
        o["webOrderLineItemId"] = t.webOrderLineItemId.map(JSONValue.string)
        o["subscriptionGroupIdentifier"] = t.subscriptionGroupIdentifier.map(JSONValue.string)
        o["expiresDate"] = t.expiresDate.map(JSONValue.int)
        o["appAccountToken"] = t.appAccountToken.map(JSONValue.string)
        o["revocationDate"] = t.revocationDate.map(JSONValue.int)
        o["revocationReason"] = t.revocationReason.map(JSONValue.int)
        if t.isUpgraded { o["isUpgraded"] = .bool(true) }
        o["offerType"] = t.offerType.map { .int($0.rawValue) }
        o["offerIdentifier"] = t.offerIdentifier.map(JSONValue.string)
        o["offerDiscountType"] = t.offerDiscountType.map { .string($0.rawValue) }
        o["revocationType"] = t.revocationType.map { .string($0.rawValue) }
        o["revocationPercentage"] = t.revocationPercentage.map(JSONValue.int)
        if t.type == .autoRenewable { o["billingPlanType"] = .string(t.commitment == nil ? "BILLED_UPFRONT" : "MONTHLY") }
        if let c = t.commitment {
            o["commitmentInfo"] = .object([
                "billingPeriodNumber": .int(c.billingPeriodNumber), "totalBillingPeriods": .int(c.totalBillingPeriods),
                "commitmentExpiresDate": .int(c.commitmentExpiresDate), "commitmentPrice": .int(c.commitmentPrice),
            ])
        }
        return .object(o)
    }

    static func renewalInfo(_ c: SubscriptionChain, latest: TransactionRecord, signedDate: Int64) -> JSONValue {
        var o: [String: JSONValue] = [
            "originalTransactionId": .string(c.originalTransactionId),
            "autoRenewProductId": .string(c.autoRenewProductId),
            "productId": .string(latest.productId),
            "autoRenewStatus": .int(c.autoRenewStatus),
            "signedDate": .int(signedDate),
            "environment": .string(c.environment.rawValue),
            "recentSubscriptionStartDate": .int(latest.originalPurchaseDate),
            "currency": .string(c.currency),
            "renewalPrice": .int(c.price),
            "appTransactionId": .string(latest.appTransactionId),
        ]
        o["renewalDate"] = latest.expiresDate.map(JSONValue.int)
        if c.isInBillingRetryPeriod { o["isInBillingRetryPeriod"] = .bool(true) }
        o["expirationIntent"] = c.expirationIntent.map(JSONValue.int)
        o["gracePeriodExpiresDate"] = c.gracePeriodExpiresDate.map(JSONValue.int)
        o["appAccountToken"] = latest.appAccountToken.map(JSONValue.string)
        o["renewalBillingPlanType"] = .string(latest.commitment == nil ? "BILLED_UPFRONT" : "MONTHLY")
        if let commitment = latest.commitment {
            // What the commitment renews into at its end (`RenewalCommitmentInfo`).
            o["commitmentInfo"] = .object([
                "commitmentAutoRenewProductId": .string(c.autoRenewProductId), "commitmentAutoRenewStatus": .int(c.autoRenewStatus),
                "commitmentRenewalBillingPlanType": .string("MONTHLY"),
                "commitmentRenewalDate": .int(commitment.commitmentExpiresDate),
                "commitmentRenewalPrice": .int(commitment.commitmentPrice),
            ])
        }
        return .object(o)
    }

    /// Apple's subscription status: 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
    static func status(_ c: SubscriptionChain, latest: TransactionRecord, now: Int64) -> Int64 {
        if latest.revocationDate != nil && !latest.isUpgraded { return 5 }
        if let grace = c.gracePeriodExpiresDate, grace > now { return 4 }
        if c.isInBillingRetryPeriod { return 3 }
        if let e = latest.expiresDate, e <= now { return 2 }
        return 1
    }
}

/// Canonical records as JSON values, field by field: the same document `JSONEncoder` would write
/// (absent fields omitted, enums as Apple's raw values), without its cost on the request path.
extension CanonicalTransaction {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "transactionId": .string(transactionId), "productId": .string(productId),
            "source": .string(source), "mappingVersion": .string(mappingVersion),
        ]
        o.put("originalTransactionId", originalTransactionId)
        o.put("webOrderLineItemId", webOrderLineItemId)
        o.put("bundleId", bundleId)
        o.put("appAppleId", appAppleId)
        o.put("subscriptionGroupIdentifier", subscriptionGroupIdentifier)
        o.put("type", type?.rawValue)
        o.put("purchaseDate", purchaseDate)
        o.put("originalPurchaseDate", originalPurchaseDate)
        o.put("expiresDate", expiresDate)
        o.put("quantity", quantity)
        o.put("inAppOwnershipType", inAppOwnershipType?.rawValue)
        o.put("isUpgraded", isUpgraded)
        o.put("offerType", offerType?.rawValue)
        o.put("offerIdentifier", offerIdentifier)
        o.put("offerDiscountType", offerDiscountType?.rawValue)
        o.put("revocationDate", revocationDate)
        o.put("revocationReason", revocationReason?.rawValue)
        o.put("environment", environment?.rawValue)
        o.put("appAccountToken", appAccountToken)
        o.put("storefront", storefront)
        o.put("price", price)
        o.put("currency", currency)
        o.put("transactionReason", transactionReason?.rawValue)
        o.put("signedDate", signedDate)
        o.put("appTransactionId", appTransactionId)
        o.put("offerPeriod", offerPeriod)
        o.put("revocationType", revocationType?.rawValue)
        o.put("revocationPercentage", revocationPercentage)
        o.put("billingPlanType", billingPlanType?.rawValue)
        o["commitmentInfo"] = commitmentInfo
        o["advancedCommerceInfo"] = advancedCommerceInfo
        return .object(o)
    }
}

extension CanonicalRenewal {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "originalTransactionId": .string(originalTransactionId),
            "source": .string(source), "mappingVersion": .string(mappingVersion),
        ]
        o.put("productId", productId)
        o.put("autoRenewProductId", autoRenewProductId)
        o.put("autoRenewStatus", autoRenewStatus?.rawValue)
        o.put("expirationIntent", expirationIntent?.rawValue)
        o.put("isInBillingRetryPeriod", isInBillingRetryPeriod)
        o.put("gracePeriodExpiresDate", gracePeriodExpiresDate)
        o.put("priceIncreaseStatus", priceIncreaseStatus?.rawValue)
        o.put("offerType", offerType?.rawValue)
        o.put("offerIdentifier", offerIdentifier)
        o.put("offerDiscountType", offerDiscountType?.rawValue)
        o.put("renewalDate", renewalDate)
        o.put("renewalPrice", renewalPrice)
        o.put("currency", currency)
        o.put("environment", environment?.rawValue)
        o.put("signedDate", signedDate)
        o.put("appTransactionId", appTransactionId)
        o.put("appAccountToken", appAccountToken)
        o.put("offerPeriod", offerPeriod)
        o["eligibleWinBackOfferIds"] = eligibleWinBackOfferIds.map { .array($0.map(JSONValue.string)) }
        o.put("renewalBillingPlanType", renewalBillingPlanType?.rawValue)
        o["commitmentInfo"] = commitmentInfo
        o["advancedCommerceInfo"] = advancedCommerceInfo
        return .object(o)
    }
}

extension Dictionary where Key == String, Value == JSONValue {
    fileprivate mutating func put(_ key: String, _ value: String?) { if let value { self[key] = .string(value) } }
    fileprivate mutating func put(_ key: String, _ value: Int64?) { if let value { self[key] = .int(value) } }
    fileprivate mutating func put(_ key: String, _ value: Bool?) { if let value { self[key] = .bool(value) } }
}

extension CanonicalAppTransaction {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "bundleId": .string(bundleId), "source": .string(source), "mappingVersion": .string(mappingVersion),
        ]
        o.put("appAppleId", appAppleId)
        o.put("receiptType", receiptType?.rawValue)
        o.put("applicationVersion", applicationVersion)
        o.put("originalApplicationVersion", originalApplicationVersion)
        o.put("versionExternalIdentifier", versionExternalIdentifier)
        o.put("receiptCreationDate", receiptCreationDate)
        o.put("originalPurchaseDate", originalPurchaseDate)
        o.put("preorderDate", preorderDate)
        o.put("requestDate", requestDate)
        o.put("expirationDate", expirationDate)
        o.put("deviceVerification", deviceVerification)
        o.put("deviceVerificationNonce", deviceVerificationNonce)
        o.put("appTransactionId", appTransactionId)
        o.put("originalPlatform", originalPlatform)
        o.put("environment", environment?.rawValue)
        return .object(o)
    }
}

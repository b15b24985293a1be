import IAPCore

// JSON views of parsed receipts for `iapgw receipt inspect` and audit logs. Dates are Unix
// milliseconds; absent fields are omitted; every raw attribute is listed.

extension ReceiptAttribute {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["type": .int(type), "version": .int(version)]
        switch value {
        case .utf8String(let s): o["encoding"] = .string("utf8String"); o["value"] = .string(s)
        case .ia5String(let s): o["encoding"] = .string("ia5String"); o["value"] = .string(s)
        case .integer(let i): o["encoding"] = .string("integer"); o["value"] = .int(i)
        case .bytes(let b): o["encoding"] = .string("hex"); o["value"] = .string(Hex.lowercase(b))
        }
        return .object(o)
    }
}

extension InAppPurchaseRecord {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [:]
        o.put("quantity", quantity)
        o.put("productId", productId)
        o.put("transactionId", transactionId)
        o.put("originalTransactionId", originalTransactionId)
        o.put("purchaseDate", purchaseDate)
        o.put("originalPurchaseDate", originalPurchaseDate)
        o.put("expiresDate", expiresDate)
        o.put("webOrderLineItemId", webOrderLineItemId)
        o.put("cancellationDate", cancellationDate)
        o.put("isTrialPeriod", isTrialPeriod)
        o.put("isInIntroOfferPeriod", isInIntroOfferPeriod)
        o.put("promotionalOfferId", promotionalOfferId)
        if !attributes.isEmpty { o["attributes"] = .array(attributes.map(\.jsonValue)) }
        return .object(o)
    }
}

extension AppReceipt {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [:]
        o.put("receiptType", receiptType)
        o.put("appItemId", appItemId)
        o.put("bundleId", bundleId)
        o.put("appVersion", appVersion)
        o.put("originalAppVersion", originalAppVersion)
        o.put("creationDate", creationDate)
        o.put("originalPurchaseDate", originalPurchaseDate)
        o.put("expirationDate", expirationDate)
        o.put("opaque", opaque.map(Hex.lowercase))
        o.put("sha1Hash", sha1Hash.map(Hex.lowercase))
        o["inAppPurchases"] = .array(inAppPurchases.map(\.jsonValue))
        // In-app records are shown above in full; here only their place in the attribute order.
        var inAppIndex: Int64 = 0
        o["attributes"] = .array(attributes.map { a in
            guard a.type == Field.inAppPurchase else { return a.jsonValue }
            defer { inAppIndex += 1 }
            return .object(["type": .int(a.type), "version": .int(a.version), "encoding": .string("inAppRecord"),
                            "value": .int(inAppIndex)])
        })
        return .object(o)
    }
}

extension LegacyTransactionReceipt {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["signatureVersion": .int(Int64(signatureVersion)),
                                      "purchaseInfo": .object(purchaseInfo.mapValues { .string($0) }),
                                      "inAppPurchases": .array([purchase.jsonValue])]
        o.put("environment", environment)
        // Outside the signature: kept apart so no reader mistakes them for signed facts.
        var unsigned: [String: JSONValue] = [:]
        unsigned.put("environment", unsignedEnvironment)
        unsigned.put("pod", unsignedPod)
        unsigned.put("signingStatus", unsignedSigningStatus)
        if !unsigned.isEmpty { o["unsigned"] = .object(unsigned) }
        return .object(o)
    }
}

// Inspection output gating: ids from a receipt whose signature did not verify are claims anyone
// can make, and printed next to real ones they end up pasted into support tickets and refunds.

/// Attribute types whose values are transaction identifiers (in-app 1703, 1705). Apple puts them
/// only inside in-app records, but a forged receipt can put them anywhere.
private let identifierAttributeTypes: Set<Int64> = [1703, 1705]
/// purchase-info keys of an iOS 6 transaction receipt that identify a transaction or a device.
private let identifierPurchaseInfoKeys: Set<String> = ["transaction-id", "original-transaction-id",
                                                       "web-order-line-item-id", "unique-identifier", "unique-vendor-identifier"]
private let withheldNote = JSONValue.string("signature not verified: transaction identifiers and in-app records withheld (use --unverified to show them)")

extension VerifiedAppReceipt {
    /// `{"receipt": …, "transactionIds": […]}` for `iapgw receipt inspect`. Unless the signature
    /// verified or `includeUnverifiedIdentifiers` is set, the in-app records, every attribute of an
    /// identifier type, and `transactionIds` are left out, and `"withheld"` says so.
    public func inspectionJSON(includeUnverifiedIdentifiers: Bool) -> JSONValue {
        if signatureVerified || includeUnverifiedIdentifiers {
            return .object(["receipt": receipt.jsonValue, "transactionIds": .array(receipt.allTransactionIds.map { .string($0) })])
        }
        guard case .object(var body) = receipt.jsonValue else { return .object(["withheld": withheldNote]) }
        body["inAppPurchases"] = nil
        body["attributes"] = .array(receipt.attributes
            .filter { $0.type != AppReceipt.Field.inAppPurchase && !identifierAttributeTypes.contains($0.type) }
            .map(\.jsonValue))
        return .object(["receipt": .object(body), "withheld": withheldNote])
    }
}

extension LegacyTransactionReceipt {
    /// As `VerifiedAppReceipt.inspectionJSON`: unless `signatureVerified` or
    /// `includeUnverifiedIdentifiers`, the purchase record and the identifier keys of purchase-info
    /// are left out.
    public func inspectionJSON(signatureVerified: Bool, includeUnverifiedIdentifiers: Bool) -> JSONValue {
        if signatureVerified || includeUnverifiedIdentifiers {
            var ids: [String] = []
            for id in [purchase.transactionId, purchase.originalTransactionId].compactMap({ $0 }) where !ids.contains(id) { ids.append(id) }
            return .object(["receipt": jsonValue, "transactionIds": .array(ids.map { .string($0) })])
        }
        guard case .object(var body) = jsonValue else { return .object(["withheld": withheldNote]) }
        body["inAppPurchases"] = nil
        body["purchaseInfo"] = .object(purchaseInfo.filter { !identifierPurchaseInfoKeys.contains($0.key) }.mapValues { .string($0) })
        return .object(["receipt": .object(body), "withheld": withheldNote])
    }
}

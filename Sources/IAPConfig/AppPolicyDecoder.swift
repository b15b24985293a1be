import Foundation
import IAPCore

/// The one decoder from the generic tree to `AppPolicy`, whichever format the file was in.
/// Every key is read through `ConfigObject`, which refuses keys nobody read.
struct AppPolicyDecoder {
    let file: String
    /// Relative paths (trust roots, secret files) are resolved against the config file's folder.
    let baseDirectory: URL
    /// The adapters routing may name (the gateway's registered ones).
    var adapters: AdapterCatalog = .standard

    func decode(_ tree: ConfigNode, expectedBundleId: String?) throws(VerificationError) -> AppPolicy {
        let root = ConfigField(node: tree, file: file, path: "")
        let o = try root.object()

        let bundleIdField = try o.required("bundleId")
        let bundleId = try bundleIdField.nonEmptyString()
        if let expectedBundleId, bundleId != expectedBundleId {
            throw bundleIdField.fail("\"\(bundleId)\" does not match the file name (\(expectedBundleId))")
        }
        let appAppleIdField = o.optional("appAppleId")
        let appAppleId = try appAppleIdField?.integer(in: 1...Int64.max)

        let environmentsField = try o.required("allowedEnvironments")
        var environments = Set<AppStoreEnvironment>()
        for item in try environmentsField.array() {
            let env = try item.oneOf([("Production", AppStoreEnvironment.production), ("Sandbox", .sandbox)])
            guard environments.insert(env).inserted else { throw item.fail("listed twice") }
        }
        guard !environments.isEmpty else { throw environmentsField.fail("must list Production and/or Sandbox") }
        if environments.contains(.production), appAppleId == nil {
            throw configError(file, line: tree.line, path: "appAppleId", "required when Production is allowed")
        }

        var sandboxAccounts = Set<String>()
        for item in try o.optional("sandboxAccounts")?.array() ?? [] {
            guard sandboxAccounts.insert(try item.nonEmptyString()).inserted else { throw item.fail("listed twice") }
        }

        let localField = o.optional("allowLocalTestEnvironments")
        let allowLocal = try localField?.bool() ?? false
        if allowLocal, environments.contains(.production), let localField {
            throw localField.fail("a production policy cannot allow local test environments (Xcode, LocalTesting)")
        }

        let trustRoots = try decodeTrustRoots(o.required("trustRoots"))
        let sharedSecret = try o.optional("sharedSecret").map { f throws(VerificationError) in try decodeSecret(f) }
        let serverAPIField = o.optional("serverAPI")
        let serverAPI = try serverAPIField.map { f throws(VerificationError) in try decodeKey(f) }
        let catalog = try decodeCatalog(o.required("productCatalog"))
        let routingField = try o.required("routing")
        let routing = try decodeRouting(routingField)
        let noncePolicy = try decodeNoncePolicy(o.required("noncePolicy"))
        let family = try o.required("familySharingPolicy").oneOf(
            AppPolicy.FamilySharingPolicy.allCases.map { ($0.rawValue, $0) })
        let grace = try decodeGracePolicy(o.required("gracePeriodPolicy"))
        let onlineChecks = try o.required("onlineChecks").bool()
        let localOnlyJWS = try o.required("localOnlyJWS").bool()
        let apiKey = try decodeAPIKey(o.required("apiKey"))
        let webhook = try o.optional("webhook").map { f throws(VerificationError) in try decodeWebhook(f) }
        let consumption = try o.optional("consumptionResponse").map { f throws(VerificationError) in
            try AppPolicy.ConsumptionResponse.decode(f)
        }
        let finishTransactions = try o.optional("finishTransactions")?.bool() ?? false
        let grandfathering = try o.optional("grandfathering").map { f throws(VerificationError) in
            try AppPolicy.Grandfathering.decode(f, catalog: catalog)
        }
        let readiness = try o.optional("readiness").map { f throws(VerificationError) in try AppPolicy.Readiness.decode(f) }
        let offerSigning = try o.optional("offerSigning").map { f throws(VerificationError) in
            try decodeKey(f, issuerOptional: true, defaultIssuerId: serverAPI?.issuerId)
        }
        let offersField = o.optional("promotionalOffers")
        let offers = try offersField.map { f throws(VerificationError) in try decodePromotionalOffers(f, catalog: catalog) } ?? []
        let retentionField = o.optional("retentionMessages")
        let retention = try retentionField.map { f throws(VerificationError) in
            try decodeRetentionRules(f, catalog: catalog, offers: offers)
        }
        try o.finish()
        if let retentionField, appAppleId == nil {
            throw retentionField.fail("needs appAppleId: a realtime request names the app by it alone")
        }
        if let offersField, !offers.isEmpty, offerSigning == nil, serverAPI == nil {
            throw offersField.fail("needs offerSigning or serverAPI: the key the offers are signed with")
        }

        let needsServerAPI = routing.modes.contains { kind, mode in
            mode.usesServerAPI && !(kind == .signedTransaction && localOnlyJWS)
        }
        if needsServerAPI, serverAPI == nil {
            throw configError(file, line: routingField.node.line, path: "serverAPI",
                              "required: routing uses the App Store Server API")
        }

        var policy = AppPolicy(
            bundleId: bundleId, appAppleId: appAppleId, allowedEnvironments: environments,
            sandboxAccounts: sandboxAccounts, allowLocalTestEnvironments: allowLocal, trustRoots: trustRoots,
            sharedSecret: sharedSecret, serverAPI: serverAPI, productCatalog: catalog, routing: routing,
            noncePolicy: noncePolicy, familySharingPolicy: family, gracePeriodPolicy: grace,
            onlineChecks: onlineChecks, localOnlyJWS: localOnlyJWS, apiKey: apiKey, webhook: webhook)
        policy.consumptionResponse = consumption
        policy.finishTransactions = finishTransactions
        policy.grandfathering = grandfathering
        policy.readiness = readiness ?? .standard
        policy.offerSigning = offerSigning
        policy.promotionalOffers = offers
        policy.retentionMessages = retention ?? []
        return policy
    }

    /// `{url, secret}`: where entitlement changes are posted, and the HMAC key that signs them.
    /// https anywhere; plain http only to loopback (a local receiver in development and tests).
    private func decodeWebhook(_ field: ConfigField) throws(VerificationError) -> AppPolicy.Webhook {
        let o = try field.object()
        let urlField = try o.required("url")
        let url = try urlField.nonEmptyString()
        let secret = try decodeSecret(o.required("secret"), allowPrevious: false)
        try o.finish()
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), let host = parsed.host?.lowercased() else {
            throw urlField.fail("not an absolute URL")
        }
        let loopback = host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw urlField.fail("must be https (plain http only to loopback)")
        }
        return AppPolicy.Webhook(url: url, secret: secret)
    }

    private func path(_ field: ConfigField) throws(VerificationError) -> URL {
        let text = try field.nonEmptyString()
        guard !text.contains("\0") else { throw field.fail("invalid path") }
        return text.hasPrefix("/") ? URL(fileURLWithPath: text).standardizedFileURL
            : baseDirectory.appendingPathComponent(text).standardizedFileURL
    }

    private func decodeTrustRoots(_ field: ConfigField) throws(VerificationError) -> AppPolicy.TrustRoots {
        let o = try field.object()
        var jws: [URL] = []
        for item in try o.required("jws").array() { jws.append(try path(item)) }
        var receipts: [URL] = []
        for item in try o.required("receipts").array() { receipts.append(try path(item)) }
        try o.finish()
        return AppPolicy.TrustRoots(jws: jws, receipts: receipts)
    }

    /// `{env: NAME}` or `{file: path}`, optionally with `previous: {env|file}` for rotation.
    func decodeSecret(_ field: ConfigField, allowPrevious: Bool = true) throws(VerificationError) -> SecretReference {
        let o = try field.object()
        let env = o.optional("env")
        let file = o.optional("file")
        let previousField = allowPrevious ? o.optional("previous") : nil
        try o.finish()
        let source: SecretReference.Source
        switch (env, file) {
        case (let env?, nil):
            let name = try env.nonEmptyString()
            guard SecretReference.isValidEnvironmentName(name) else {
                // The value is not echoed: a secret pasted here by mistake must not reach a log.
                throw env.fail("not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
            }
            source = .environmentVariable(name)
        case (nil, let file?):
            source = .file(try path(file))
        default:
            throw field.fail("give exactly one of env or file")
        }
        let previous = try previousField.map { f throws(VerificationError) in try decodeSecret(f, allowPrevious: false).source }
        return SecretReference(source, previous: previous)
    }

    /// An In-App Purchase key `{issuerId, keyId, privateKey, retiresAt?}` (`serverAPI`, `offerSigning`). An
    /// offer-signing key (`issuerOptional`) may leave `issuerId` out for `defaultIssuerId` (the
    /// Server API's).
    private func decodeKey(_ field: ConfigField, issuerOptional: Bool = false, defaultIssuerId: String? = nil)
        throws(VerificationError) -> AppPolicy.InAppPurchaseKey {
        let o = try field.object()
        let issuerField = issuerOptional ? o.optional("issuerId") : try o.required("issuerId")
        let keyField = try o.required("keyId")
        let keyId = try keyField.nonEmptyString()
        guard keyId.count <= 32, keyId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw keyField.fail("not an App Store Connect key id (letters and digits)")
        }
        let privateKey = try decodeSecret(o.required("privateKey"))
        let retiresAt = try o.optional("retiresAt").map { f throws(VerificationError) in try f.integer(in: 1...Int64.max) }
        let issuerId = try issuerField?.nonEmptyString() ?? defaultIssuerId
        try o.finish()
        guard let issuerId else { throw field.fail("issuerId is required when the app has no serverAPI") }
        guard UUID(uuidString: issuerId) != nil else { throw (issuerField ?? field).fail("issuerId is not a UUID") }
        return AppPolicy.InAppPurchaseKey(issuerId: issuerId, keyId: keyId, privateKey: privateKey, retiresAt: retiresAt)
    }

    private func decodeCatalog(_ field: ConfigField) throws(VerificationError) -> [String: AppPolicy.Product] {
        var catalog: [String: AppPolicy.Product] = [:]
        for item in try field.array() {
            let o = try item.object()
            let idField = try o.required("productId")
            let productId = try idField.nonEmptyString()
            let type = try o.required("type").oneOf(TransactionType.known.map { ($0.rawValue, $0) })
            let priceField = o.optional("priceMilliunits")
            let price = try priceField?.integer(in: 0...Int64.max)
            let currencyField = o.optional("currency")
            let currency = try currencyField?.string()
            try o.finish()
            if let currencyField, let currency,
               !(currency.count == 3 && currency.allSatisfy({ $0.isASCII && $0.isUppercase })) {
                throw currencyField.fail("not an ISO 4217 code (three capital letters)")
            }
            if (price == nil) != (currency == nil) {
                throw (priceField ?? currencyField ?? item).fail("priceMilliunits and currency go together")
            }
            guard catalog[productId] == nil else { throw idField.fail("product \(productId) listed twice") }
            catalog[productId] = AppPolicy.Product(productId: productId, type: type, priceMilliunits: price, currency: currency)
        }
        return catalog
    }

    private func decodeNoncePolicy(_ field: ConfigField) throws(VerificationError) -> AppPolicy.NoncePolicy {
        let o = try field.object()
        let required = try o.required("requiredForReceipts").bool()
        let ttl = try o.required("ttlSeconds").integer(in: 1...86_400)
        try o.finish()
        return AppPolicy.NoncePolicy(requiredForReceipts: required, ttlSeconds: ttl)
    }

    private func decodeGracePolicy(_ field: ConfigField) throws(VerificationError) -> AppPolicy.GracePeriodPolicy {
        let o = try field.object()
        let grace = try o.required("grantDuringGracePeriod").bool()
        let retry = try o.required("grantDuringBillingRetry").bool()
        try o.finish()
        return AppPolicy.GracePeriodPolicy(grantDuringGracePeriod: grace, grantDuringBillingRetry: retry)
    }

    /// `{sha256: hex}` or a secret reference `{env|file}`.
    private func decodeAPIKey(_ field: ConfigField) throws(VerificationError) -> APIKeyReference {
        let o = try field.object()
        if let hashField = o.optional("sha256") {
            try o.finish()
            let hex = try hashField.string()
            guard hex.count == 64, hex.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
                throw hashField.fail("not a lowercase hex SHA-256 (64 characters)")
            }
            return .sha256(hex)
        }
        return .secret(try decodeSecret(field, allowPrevious: true))
    }
}

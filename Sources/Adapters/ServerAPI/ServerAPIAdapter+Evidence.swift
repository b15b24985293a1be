import AppReceipts
import AppleTrust
import Foundation
import IAPCore

extension ServerAPIAdapter {
    // MARK: Transaction id

    func verifyTransactionId(_ transactionId: String, policy: any EvidencePolicy, _ context: AppContext,
                             into collected: inout Collected) async throws(VerificationError) {
        collected.presentedTransactionId = transactionId
        let client = try context.client.get()
        let info = try await client.getTransactionInfo(transactionId: transactionId,
                                                       order: try Self.order(policy, app: context.policy))
        let transaction = try await verifiedTransaction(info.signedTransactionInfo, answeredBy: info.environment, context)
        let normalized = try normalizer.normalize(transaction: transaction.raw)
        // Before Apple is asked anything more about it (its chain's renewals), as on every other path.
        try policy.admit(EvidenceIdentity(bundleId: normalized.bundleId, appAppleId: normalized.appAppleId,
                                          environment: normalized.environment, kind: .transaction))
        try collected.add(normalized)
        try await addRenewals(for: [transaction], client: client, environment: info.environment, context, into: &collected)
    }

    // MARK: StoreKit 2 signed transaction

    func verifySignedTransaction(_ jws: String, policy: any EvidencePolicy, _ context: AppContext,
                                 into collected: inout Collected) async throws(VerificationError) {
        let app = context.policy
        let local = try await context.verifier.verifying { verifier throws(VerificationError) in
            try verifier.verifyAndDecodeTransaction(jws)
        }
        collected.presentedTransactionId = local.transactionId
        // Before Apple is asked about it: the environment it was signed in must be one this claim accepts.
        try policy.admit(EvidenceIdentity(bundleId: local.bundleId, environment: local.environment, kind: .transaction))
        // Xcode and LocalTesting purchases exist on no Apple server: there is nothing to confirm.
        if app.localOnlyJWS || local.environment?.isLocalTest == true {
            try collected.add(try normalizer.normalize(transaction: local.raw))
            return
        }
        let client = try context.client.get()
        let environment: ServerAPIEnvironment = local.environment == .production ? .production : .sandbox
        // Apple's answer wins over what the client sent: it knows of refunds and revocations since.
        let info = try await client.getTransactionInfo(transactionId: local.transactionId, order: .only(environment))
        let confirmed = try await verifiedTransaction(info.signedTransactionInfo, answeredBy: info.environment, context)
        guard confirmed.transactionId == local.transactionId else {
            throw VerificationError(.notificationInconsistent,
                                    "Get Transaction Info answered transaction \(ClientExcerpt.of(confirmed.transactionId)) for \(ClientExcerpt.of(local.transactionId))")
        }
        try collected.add(try normalizer.normalize(transaction: confirmed.raw))
        try await addRenewals(for: [confirmed], client: client, environment: info.environment, context, into: &collected)
    }

    // MARK: App transaction (the app's own purchase)

    /// A StoreKit 2 AppTransaction JWS, verified locally and then read again from Apple (Get App
    /// Transaction Info by its appTransactionId) unless the policy trusts local JWS; or an id, read
    /// from Apple. Either way the AppTransaction acted on is one whose signature was verified.
    func verifyAppTransaction(_ evidence: PurchaseEvidence, policy: any EvidencePolicy, _ context: AppContext)
        async throws(VerificationError) -> (AppStoreEnvironment, CanonicalAppTransaction) {
        let app = context.policy
        var lookup = evidence.value
        var order = try Self.order(policy, app: app)
        if evidence.kind == .signedAppTransaction {
            let signed = evidence.value
            let local = try await context.verifier.verifying { verifier throws(VerificationError) in
                try verifier.verifyAndDecodeAppTransaction(signed)
            }
            try policy.admit(EvidenceIdentity(bundleId: local.bundleId, appAppleId: local.appAppleId, environment: local.receiptType,
                                              kind: .appTransaction))
            if app.localOnlyJWS || local.receiptType.isLocalTest {
                return (local.receiptType, try normalizer.normalize(appTransaction: local.raw))
            }
            guard let id = local.appTransactionId else {
                throw VerificationError(.missingField, "appTransaction.appTransactionId is required to confirm it with Apple")
            }
            lookup = id
            order = .only(local.receiptType == .production ? .production : .sandbox)
        }
        return try await readAppTransaction(anyTransactionId: lookup, order: order,
                                            expecting: evidence.kind == .signedAppTransaction ? lookup : nil, policy: policy, context)
    }

    /// Get App Transaction Info, its answer verified and put to the policy; `expecting`: the
    /// appTransactionId the answer must carry.
    func readAppTransaction(anyTransactionId lookup: String, order: ServerAPIEnvironmentOrder, expecting: String?,
                            policy: any EvidencePolicy, _ context: AppContext)
        async throws(VerificationError) -> (AppStoreEnvironment, CanonicalAppTransaction) {
        let answer = try await context.client.get().getAppTransactionInfo(anyTransactionId: lookup, order: order)
        let signedInfo = answer.signedAppTransactionInfo
        let confirmed = try await context.verifier.verifying { verifier throws(VerificationError) in
            try verifier.verifyAndDecodeAppTransaction(signedInfo)
        }
        guard confirmed.receiptType == answer.environment.appStoreEnvironment else {
            throw VerificationError(.environmentNotAllowed, "Get App Transaction Info answered from another environment than it states")
        }
        if let expecting, confirmed.appTransactionId != expecting {
            throw VerificationError(.notificationInconsistent, "Get App Transaction Info answered another app transaction")
        }
        try policy.admit(EvidenceIdentity(bundleId: confirmed.bundleId, appAppleId: confirmed.appAppleId,
                                          environment: confirmed.receiptType, kind: .appTransaction))
        return (confirmed.receiptType, try normalizer.normalize(appTransaction: confirmed.raw))
    }

    // MARK: Legacy receipt, migrated

    func verifyReceipt(_ base64: String, policy: any EvidencePolicy, _ context: AppContext,
                       into collected: inout Collected) async throws(VerificationError) {
        let app = context.policy
        let verified = try context.receiptReader.get().read(base64: base64, mode: .verified)
        let receipt = verified.receipt
        guard verified.signatureVerified else {
            throw verified.signatureError ?? VerificationError(.invalidSignature, "receipt signature did not verify")
        }
        let receiptEnvironment: ServerAPIEnvironment = receipt.receiptType == "Production" ? .production : .sandbox
        // Before Apple is asked about any of its purchases.
        try policy.admit(EvidenceIdentity(bundleId: receipt.bundleId, appAppleId: receipt.appItemId,
                                          environment: receiptEnvironment.appStoreEnvironment, kind: .receipt))

        // One id per purchase chain: Get Transaction History answers with the customer's whole
        // history, so an id already seen in an earlier answer needs no call of its own.
        var chains: [String] = []
        for record in receipt.inAppPurchases {
            guard let id = record.originalTransactionId ?? record.transactionId, !id.isEmpty, !chains.contains(id) else {
                continue
            }
            chains.append(id)
        }
        guard chains.count <= options.maxReceiptLookups else {
            throw VerificationError(.inputTooLarge,
                                    "receipt names \(chains.count) purchase chains; at most \(options.maxReceiptLookups) are looked up")
        }
        guard !chains.isEmpty else {
            collected.environment = receiptEnvironment.appStoreEnvironment
            return
        }
        let client = try context.client.get()
        var verifiedTransactions: [JWSTransactionDecodedPayload] = []
        var seen = Set<String>()
        var unknown: [String] = []
        for id in chains where !seen.contains(id) {
            let history: TransactionHistoryResponse
            do {
                history = try await client.getTransactionHistory(transactionId: id, order: .only(receiptEnvironment))
            } catch where error.code == .transactionNotFound {
                // Apple's Server API does not know this purchase (4040010): it grants nothing here,
                // and the receipt's other purchases are still answered (a comparison reports this one
                // as onlyInLegacy: the purchase a cutover would lose).
                logger.warning("serverapi.receipt_chain_unknown", ["bundleId": app.bundleId, "transactionId": id])
                unknown.append(id)
                continue
            }
            // A history cut at the page cap lacks its newest records (renewals, refunds): no verdict
            // is drawn from part of the facts.
            guard history.isComplete else {
                throw VerificationError(.inputTooLarge,
                                        "purchase history longer than \(options.maxPages) pages; not judged on part of it")
            }
            for signed in history.signedTransactions {
                let t = try await verifiedTransaction(signed, answeredBy: history.environment, context)
                seen.insert(t.transactionId)
                if let original = t.originalTransactionId { seen.insert(original) }
                verifiedTransactions.append(t)
                try collected.add(try normalizer.normalize(transaction: t.raw))
            }
            if !seen.contains(id) {
                logger.warning("serverapi.receipt_chain_missing", ["bundleId": app.bundleId, "transactionId": id])
            }
        }
        if unknown.count == chains.count {
            throw VerificationError(.transactionNotFound, "the App Store Server API knows none of the receipt's purchases")
        }
        if collected.environment == nil { collected.environment = receiptEnvironment.appStoreEnvironment }
        try collected.agree(on: receiptEnvironment.appStoreEnvironment)
        try await addRenewals(for: verifiedTransactions, client: client, environment: receiptEnvironment, context,
                              into: &collected)
        // The app-level facts beside the receipt's (compared in shadow and compare routing), read only
        // where a grandfathering rule uses them: one more call, by a purchase of the receipt. They
        // grant nothing on this path (no download to bind; see GrandfatheringGrant).
        if app.grandfathering != nil, let known = verifiedTransactions.first {
            collected.appTransaction = try await readAppTransaction(anyTransactionId: known.transactionId,
                                                                    order: .only(receiptEnvironment), expecting: nil,
                                                                    policy: policy, context).1
        }
    }

    // MARK: Shared steps

    /// Verifies a transaction JWS Apple returned and checks it came from the host that answered (a
    /// host the claim's policy accepted: `order`, or the admitted evidence's own environment).
    func verifiedTransaction(_ jws: String, answeredBy environment: ServerAPIEnvironment,
                             _ context: AppContext) async throws(VerificationError) -> JWSTransactionDecodedPayload {
        let t = try await context.verifier.verifying { verifier throws(VerificationError) in
            try verifier.verifyAndDecodeTransaction(jws)
        }
        guard t.environment == environment.appStoreEnvironment else {
            throw VerificationError(.environmentNotAllowed,
                                    "the \(environment.rawValue) App Store Server API returned a \(t.environment.map { ClientExcerpt.of($0.rawValue) } ?? "unknown") transaction")
        }
        return t
    }

    /// For auto-renewable subscriptions: the chain's latest transaction and renewal info, from one
    /// Get All Subscription Statuses call (it answers for every group of the customer).
    func addRenewals(for transactions: [JWSTransactionDecodedPayload], client: AppStoreServerAPIClient,
                     environment: ServerAPIEnvironment, _ context: AppContext,
                     into collected: inout Collected) async throws(VerificationError) {
        let subscriptions = transactions.filter { $0.type == .autoRenewable }
        guard let first = subscriptions.first else { return }
        let chains = Set(subscriptions.map { $0.originalTransactionId ?? $0.transactionId })
        let statuses = try await client.getAllSubscriptionStatuses(transactionId: first.transactionId,
                                                                   order: .only(environment))
        for item in statuses.data.flatMap({ $0.lastTransactions }) where chains.contains(item.originalTransactionId) {
            let latest = try await verifiedTransaction(item.signedTransactionInfo, answeredBy: statuses.environment, context)
            guard (latest.originalTransactionId ?? latest.transactionId) == item.originalTransactionId else {
                throw VerificationError(.notificationInconsistent,
                                        "lastTransactions item for \(ClientExcerpt.of(item.originalTransactionId)) holds another chain's transaction")
            }
            try collected.add(try normalizer.normalize(transaction: latest.raw))
            guard let signedRenewal = item.signedRenewalInfo else { continue }
            let renewal = try await context.verifier.verifying { verifier throws(VerificationError) in
                try verifier.verifyAndDecodeRenewalInfo(signedRenewal)
            }
            guard renewal.originalTransactionId == item.originalTransactionId else {
                throw VerificationError(.notificationInconsistent,
                                        "renewal info for \(ClientExcerpt.of(renewal.originalTransactionId)) filed under \(ClientExcerpt.of(item.originalTransactionId))")
            }
            try collected.add(try normalizer.normalize(renewalInfo: renewal.raw))
        }
    }
}

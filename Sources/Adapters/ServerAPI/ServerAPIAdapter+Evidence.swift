import AppReceipts
import AppleTrust
import Foundation
import IAPCore

extension ServerAPIAdapter {
    // MARK: Transaction id

    func verifyTransactionId(_ transactionId: String, account: String, _ context: AppContext,
                             into collected: inout Collected) async throws(VerificationError) {
        let app = context.policy
        collected.presentedTransactionId = transactionId
        let client = try context.client.get()
        let info = try await client.getTransactionInfo(transactionId: transactionId, order: try Self.order(app, account: account))
        let transaction = try await verifiedTransaction(info.signedTransactionInfo, answeredBy: info.environment, account: account,
                                                  context)
        try collected.add(try normalizer.normalize(transaction: transaction.raw))
        try await addRenewals(for: [transaction], client: client, environment: info.environment, account: account,
                              context, into: &collected)
    }

    // MARK: StoreKit 2 signed transaction

    func verifySignedTransaction(_ jws: String, account: String, _ context: AppContext,
                                 into collected: inout Collected) async throws(VerificationError) {
        let app = context.policy
        let local = try await context.verifier.verifying { verifier throws(VerificationError) in
            try verifier.verifyAndDecodeTransaction(jws)
        }
        collected.presentedTransactionId = local.transactionId
        try Self.checkEnvironment(local.environment, app: app, account: account)
        // Xcode and LocalTesting purchases exist on no Apple server: there is nothing to confirm.
        if app.localOnlyJWS || local.environment?.isLocalTest == true {
            try collected.add(try normalizer.normalize(transaction: local.raw))
            return
        }
        let client = try context.client.get()
        let environment: ServerAPIEnvironment = local.environment == .production ? .production : .sandbox
        // Apple's answer wins over what the client sent: it knows of refunds and revocations since.
        let info = try await client.getTransactionInfo(transactionId: local.transactionId, order: .only(environment))
        let confirmed = try await verifiedTransaction(info.signedTransactionInfo, answeredBy: info.environment, account: account,
                                                context)
        guard confirmed.transactionId == local.transactionId else {
            throw VerificationError(.notificationInconsistent,
                                    "Get Transaction Info answered transaction \(confirmed.transactionId.prefix(32)) for \(local.transactionId)")
        }
        try collected.add(try normalizer.normalize(transaction: confirmed.raw))
        try await addRenewals(for: [confirmed], client: client, environment: info.environment, account: account,
                              context, into: &collected)
    }

    // MARK: Legacy receipt, migrated

    func verifyReceipt(_ base64: String, account: String, _ context: AppContext,
                       into collected: inout Collected) async throws(VerificationError) {
        let app = context.policy
        let verified = try context.receiptReader.get().read(base64: base64, mode: .verified)
        let receipt = verified.receipt
        guard verified.signatureVerified else {
            throw verified.signatureError ?? VerificationError(.invalidSignature, "receipt signature did not verify")
        }
        guard let bundleId = receipt.bundleId else { throw VerificationError(.missingField, "receipt has no bundle id") }
        guard bundleId == app.bundleId else {
            throw VerificationError(.bundleIdMismatch, "receipt for bundle \"\(bundleId.prefix(200))\", expected \"\(app.bundleId)\"")
        }
        if let expected = app.appAppleId, let found = receipt.appItemId, found != 0, found != expected {
            throw VerificationError(.appAppleIdMismatch, "receipt for app item id \(found), expected \(expected)")
        }
        let receiptEnvironment: ServerAPIEnvironment = receipt.receiptType == "Production" ? .production : .sandbox
        try Self.checkEnvironment(receiptEnvironment.appStoreEnvironment, app: app, account: account)

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
                let t = try await verifiedTransaction(signed, answeredBy: history.environment, account: account, context)
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
        try await addRenewals(for: verifiedTransactions, client: client, environment: receiptEnvironment,
                              account: account, context, into: &collected)
    }

    // MARK: Shared steps

    /// Verifies a transaction JWS Apple returned and checks it came from the host that answered.
    func verifiedTransaction(_ jws: String, answeredBy environment: ServerAPIEnvironment, account: String,
                             _ context: AppContext) async throws(VerificationError) -> JWSTransactionDecodedPayload {
        let t = try await context.verifier.verifying { verifier throws(VerificationError) in
            try verifier.verifyAndDecodeTransaction(jws)
        }
        try Self.checkEnvironment(t.environment, app: context.policy, account: account)
        guard t.environment == environment.appStoreEnvironment else {
            throw VerificationError(.environmentNotAllowed,
                                    "the \(environment.rawValue) App Store Server API returned a \(t.environment?.rawValue.prefix(64) ?? "unknown") transaction")
        }
        return t
    }

    /// For auto-renewable subscriptions: the chain's latest transaction and renewal info, from one
    /// Get All Subscription Statuses call (it answers for every group of the customer).
    func addRenewals(for transactions: [JWSTransactionDecodedPayload], client: AppStoreServerAPIClient,
                     environment: ServerAPIEnvironment, account: String, _ context: AppContext,
                     into collected: inout Collected) async throws(VerificationError) {
        let subscriptions = transactions.filter { $0.type == .autoRenewable }
        guard let first = subscriptions.first else { return }
        let chains = Set(subscriptions.map { $0.originalTransactionId ?? $0.transactionId })
        let statuses = try await client.getAllSubscriptionStatuses(transactionId: first.transactionId,
                                                                   order: .only(environment))
        for item in statuses.data.flatMap({ $0.lastTransactions }) where chains.contains(item.originalTransactionId) {
            let latest = try await verifiedTransaction(item.signedTransactionInfo, answeredBy: statuses.environment,
                                                 account: account, context)
            guard (latest.originalTransactionId ?? latest.transactionId) == item.originalTransactionId else {
                throw VerificationError(.notificationInconsistent,
                                        "lastTransactions item for \(item.originalTransactionId) holds another chain's transaction")
            }
            try collected.add(try normalizer.normalize(transaction: latest.raw))
            guard let signedRenewal = item.signedRenewalInfo else { continue }
            let renewal = try await context.verifier.verifying { verifier throws(VerificationError) in
                try verifier.verifyAndDecodeRenewalInfo(signedRenewal)
            }
            try Self.checkEnvironment(renewal.environment, app: context.policy, account: account)
            guard renewal.originalTransactionId == item.originalTransactionId else {
                throw VerificationError(.notificationInconsistent,
                                        "renewal info for \(renewal.originalTransactionId.prefix(32)) filed under \(item.originalTransactionId)")
            }
            try collected.add(try normalizer.normalize(renewalInfo: renewal.raw))
        }
    }
}

import IAPCore

extension SignedDataVerifier {
    /// Verifies a V2 notification's `signedPayload` AND every JWS inside it. Each inner JWS must
    /// verify on its own (pinned chain, signature, kind) and agree with the envelope on bundle and
    /// environment: a genuine envelope cannot smuggle a forged or foreign transaction.
    public func verifyAndDecodeNotification(_ signedPayload: String) throws(VerificationError) -> ResponseBodyV2DecodedPayload {
        let payload = try verifiedPayload(signedPayload, dateField: "signedDate", expected: .notification)
        try requireKind(payload, .notification)
        var n = try ResponseBodyV2DecodedPayload(payload)

        let identity = try envelopeIdentity(n)
        try checkIdentity(bundleId: identity.bundleId, requireBundle: true, appAppleId: identity.appAppleId,
                          environment: identity.environment)

        for container in [n.data, n.appData].compactMap({ $0 }) {
            if let jws = container.signedTransactionInfo {
                let (t, ids) = try verified(jws, as: .transaction, JWSTransactionDecodedPayload.init)
                try agree(ids, environment: t.environment, with: identity, field: "signedTransactionInfo")
                n.verifiedTransaction = t
            }
            if let jws = container.signedRenewalInfo {
                let (r, ids) = try verified(jws, as: .renewalInfo, JWSRenewalInfoDecodedPayload.init)
                try agree(ids, environment: r.environment, with: identity, field: "signedRenewalInfo")
                n.verifiedRenewalInfo = r
            }
            if let jws = container.signedAppTransactionInfo {
                let (a, ids) = try verified(jws, as: .appTransaction, AppTransaction.init)
                try agree(ids, environment: a.receiptType, with: identity, field: "signedAppTransactionInfo")
                n.verifiedAppTransaction = a
            }
        }
        if let t = n.verifiedTransaction, let r = n.verifiedRenewalInfo,
           let original = t.originalTransactionId, original != r.originalTransactionId {
            throw VerificationError(.notificationInconsistent, "transaction and renewal info name different subscriptions")
        }
        return n
    }

    struct EnvelopeIdentity { var bundleId: String?; var appAppleId: Int64?; var environment: AppStoreEnvironment? }

    /// Bundle, app and environment as the envelope states them. Where several parts state them
    /// (data, appData, summary, externalPurchaseToken), they must all say the same.
    func envelopeIdentity(_ n: ResponseBodyV2DecodedPayload) throws(VerificationError) -> EnvelopeIdentity {
        var parts: [(String, EnvelopeIdentity)] = []
        if let d = n.data { parts.append(("data", .init(bundleId: d.bundleId, appAppleId: d.appAppleId, environment: d.environment))) }
        if let d = n.appData { parts.append(("appData", .init(bundleId: d.bundleId, appAppleId: d.appAppleId, environment: d.environment))) }
        if let s = n.summary { parts.append(("summary", .init(bundleId: s.bundleId, appAppleId: s.appAppleId, environment: s.environment))) }
        if let t = n.externalPurchaseToken {
            guard t.externalPurchaseId != nil else {
                throw VerificationError(.missingField, "notification.externalPurchaseToken.externalPurchaseId is required (it names the environment)")
            }
            parts.append(("externalPurchaseToken", .init(bundleId: t.bundleId, appAppleId: t.appAppleId, environment: t.environment)))
        }
        guard let first = parts.first else {
            throw VerificationError(.missingField, "notification has no data, appData, summary or externalPurchaseToken")
        }
        var merged = first.1
        for (name, part) in parts.dropFirst() {
            if let b = part.bundleId {
                if let m = merged.bundleId, m != b { throw inconsistent(name, "bundleId") }
                merged.bundleId = b
            }
            if let a = part.appAppleId {
                if let m = merged.appAppleId, m != a { throw inconsistent(name, "appAppleId") }
                merged.appAppleId = a
            }
            if let e = part.environment {
                if let m = merged.environment, m != e { throw inconsistent(name, "environment") }
                merged.environment = e
            }
        }
        return merged
    }

    private func inconsistent(_ part: String, _ field: String) -> VerificationError {
        VerificationError(.notificationInconsistent, "notification \(part).\(field) disagrees with the rest of the envelope")
    }

    /// An inner payload must agree with its envelope on every identity field it states, and with
    /// this verifier's own bundle and app (the envelope may not state the app id).
    private func agree(_ ids: (bundleId: String?, appAppleId: Int64?), environment: AppStoreEnvironment?,
                       with envelope: EnvelopeIdentity, field: String) throws(VerificationError) {
        if let bundleId = ids.bundleId, bundleId != envelope.bundleId {
            throw VerificationError(.notificationInconsistent, "\(field) is for another bundle than the notification")
        }
        if let found = ids.appAppleId, let stated = envelope.appAppleId, found != stated {
            throw VerificationError(.notificationInconsistent, "\(field) is for another appAppleId than the notification")
        }
        if environment != envelope.environment {
            throw VerificationError(.notificationInconsistent, "\(field) is from another environment than the notification")
        }
        if let expected = appAppleId, let found = ids.appAppleId, found != expected {
            throw VerificationError(.appAppleIdMismatch, "\(field) is signed for appAppleId \(found), expected \(expected)")
        }
    }
}

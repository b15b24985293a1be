import IAPCore

extension SignedDataVerifier {
    /// Verifies a V2 notification's `signedPayload` AND every JWS inside it. Each inner JWS must
    /// verify on its own (pinned chain, signature, kind) and agree with the envelope on bundle and
    /// environment: a genuine envelope cannot smuggle a forged or foreign transaction.
    public func verifyAndDecodeNotification(_ signedPayload: String) throws(VerificationError) -> ResponseBodyV2DecodedPayload {
        let payload = try verifiedPayload(signedPayload, dateField: "signedDate", expected: .notification)
        try requireKind(payload, .notification)
        var n = try ResponseBodyV2DecodedPayload(payload)

        let envelope = try envelopeIdentity(n)
        try identity.check(envelope)

        for container in [n.data, n.appData].compactMap({ $0 }) {
            if let jws = container.signedTransactionInfo {
                let (t, stated) = try verified(jws, as: .transaction, JWSTransactionDecodedPayload.init)
                try agree(stated, with: envelope, field: "signedTransactionInfo")
                n.verifiedTransaction = t
            }
            if let jws = container.signedRenewalInfo {
                let (r, stated) = try verified(jws, as: .renewalInfo, JWSRenewalInfoDecodedPayload.init)
                try agree(stated, with: envelope, field: "signedRenewalInfo")
                n.verifiedRenewalInfo = r
            }
            if let jws = container.signedAppTransactionInfo {
                let (a, stated) = try verified(jws, as: .appTransaction, AppTransaction.init)
                try agree(stated, with: envelope, field: "signedAppTransactionInfo")
                n.verifiedAppTransaction = a
            }
        }
        if let t = n.verifiedTransaction, let r = n.verifiedRenewalInfo,
           let original = t.originalTransactionId, original != r.originalTransactionId {
            throw VerificationError(.notificationInconsistent, "transaction and renewal info name different subscriptions")
        }
        n.verifiedIdentity = envelope
        return n
    }

    /// Bundle, app and environment as the envelope states them. Where several parts state them
    /// (data, appData, summary, externalPurchaseToken), they must all say the same.
    func envelopeIdentity(_ n: ResponseBodyV2DecodedPayload) throws(VerificationError) -> EvidenceIdentity {
        func part(_ bundleId: String?, _ appAppleId: Int64?, _ environment: AppStoreEnvironment?) -> EvidenceIdentity {
            EvidenceIdentity(bundleId: bundleId, appAppleId: appAppleId, environment: environment, kind: .notification)
        }
        var parts: [(String, EvidenceIdentity)] = []
        if let d = n.data { parts.append(("data", part(d.bundleId, d.appAppleId, d.environment))) }
        if let d = n.appData { parts.append(("appData", part(d.bundleId, d.appAppleId, d.environment))) }
        if let s = n.summary { parts.append(("summary", part(s.bundleId, s.appAppleId, s.environment))) }
        if let t = n.externalPurchaseToken {
            guard t.externalPurchaseId != nil else {
                throw VerificationError(.missingField, "notification.externalPurchaseToken.externalPurchaseId is required (it names the environment)")
            }
            parts.append(("externalPurchaseToken", part(t.bundleId, t.appAppleId, t.environment)))
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

    /// An inner payload must agree with its envelope on every identity member it states, and is
    /// held to this verifier's identity like any payload (the envelope may not state the app id).
    private func agree(_ inner: EvidenceIdentity, with envelope: EvidenceIdentity, field: String) throws(VerificationError) {
        if let bundleId = inner.bundleId, bundleId != envelope.bundleId {
            throw VerificationError(.notificationInconsistent, "\(field) is for another bundle than the notification")
        }
        if let found = inner.appAppleId, let stated = envelope.appAppleId, found != stated {
            throw VerificationError(.notificationInconsistent, "\(field) is for another appAppleId than the notification")
        }
        if inner.environment != envelope.environment {
            throw VerificationError(.notificationInconsistent, "\(field) is from another environment than the notification")
        }
        try identity.check(inner)
    }
}

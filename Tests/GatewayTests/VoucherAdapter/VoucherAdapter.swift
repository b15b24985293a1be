import Adapters
import AppleTrust
import IAPConfig
import IAPCore

/// A third kind of evidence, for tests only: a voucher `bundleId:productId:transactionId:purchaseMs:MAC`,
/// MAC = hex HMAC-SHA256 of the rest under the issuer's key. It proves the plugin seam: this file,
/// plus one element in a list of adapter factories, is all a new adapter takes (its form names the
/// request member; an app file routes its kind by its id; the gateway's policy decides what it
/// admits; the purchase checks, ledger and answer are the gateway's).
struct VoucherAdapter: VerificationAdapter {
    static let kind = AppPolicy.EvidenceKind(rawValue: "voucher")
    static let id = AdapterID(rawValue: "voucher")
    var id: AdapterID { Self.id }
    let evidenceForms = [EvidenceForm(kind: Self.kind, member: "voucher",
                                      summary: "a voucher signed by the test issuer (test-only adapter)")]
    let key: [UInt8]

    /// How a gateway registers it, like any production adapter (`GatewayAssembly.productionAdapters`).
    struct Factory: AdapterFactory {
        let key: [UInt8]
        var id: AdapterID { VoucherAdapter.id }
        var evidenceKinds: [AppPolicy.EvidenceKind] { [VoucherAdapter.kind] }
        func make(_ parts: AdapterParts) throws(VerificationError) -> any VerificationAdapter { VoucherAdapter(key: key) }
    }

    static func issue(bundleId: String, productId: String, transactionId: String, purchaseMs: Int64, key: [UInt8]) -> String {
        let body = "\(bundleId):\(productId):\(transactionId):\(purchaseMs)"
        return body + ":" + HMACSHA256.hex(key: key, message: Array(body.utf8))
    }

    func verify(_ evidence: PurchaseEvidence, for app: AppPolicy, policy: any EvidencePolicy)
        async throws(VerificationError) -> AdapterOutcome {
        let parts = evidence.value.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 5, let purchaseMs = Int64(parts[3]) else {
            throw VerificationError(.malformedRequest, "a voucher is bundleId:productId:transactionId:purchaseMs:mac")
        }
        let body = parts[0..<4].joined(separator: ":")
        let expected = HMACSHA256.mac(key: key, message: Array(body.utf8))
        guard let presented = Hex.bytes(parts[4]), presented.count == expected.count,
              zip(presented, expected).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw VerificationError(.invalidSignature, "the voucher's MAC does not verify")
        }
        // Verified; what it states is the policy's to judge before anything of it is used.
        try policy.admit(EvidenceIdentity(bundleId: parts[0], environment: .production))
        var t = CanonicalTransaction(transactionId: parts[2], productId: parts[1], source: id.rawValue,
                                     mappingVersion: "voucher/v1")
        t.originalTransactionId = parts[2]
        t.bundleId = parts[0]
        t.type = .nonConsumable
        t.purchaseDate = purchaseMs
        t.environment = .production
        return AdapterOutcome(adapter: id, environment: .production, transactions: [t], mappingVersion: "voucher/v1",
                              presentedTransactionId: parts[2])
    }
}

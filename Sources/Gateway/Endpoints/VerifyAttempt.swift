import Adapters
import AppleTrust
import Foundation
import HTTPServer
import IAPConfig
import IAPCore
import Ledger

/// One verify attempt's audit record: begun when the request is read, filled in as the attempt
/// learns what it verified, and completed once, either with the answer's verdict by the claim's
/// judge (written in the claim's transaction) or with the refusal by the endpoint. An attempt
/// therefore leaves one row, whichever way it ends.
struct VerifyAttempt: Sendable {
    private var record: AuditRecord
    private let started = DispatchTime.now().uptimeNanoseconds
    /// What Apple answers on the way, noted by the adapters (`AppleAnswerNote.current`).
    let appleAnswers = AppleAnswerNote()

    init(_ request: HTTPRequest, app: AppPolicy, account: String, evidence: PurchaseEvidence, now: Int64) {
        record = AuditRecord(time: now, bundleId: app.bundleId, account: account, evidenceKind: evidence.kind.rawValue,
                             evidenceSHA256: SHA256Digest.lowercaseHex(evidence.value), transactionIds: [],
                             productIds: [], environment: nil, verdict: .refused, errorCode: nil, adapter: nil,
                             latencyMicros: 0, requestId: request.requestId,
                             clientVersion: AuditRecord.clientVersion(request.headers["X-Client-Version"]))
    }

    /// The audit trail keeps a digest of the evidence, never the evidence.
    var evidenceSHA256: String { record.evidenceSHA256 }

    /// The adapter whose outcome answers.
    var adapter: String? {
        get { record.adapter }
        set { record.adapter = newValue }
    }

    var transactionCount: Int { record.transactionIds.count }

    mutating func verified(_ outcome: AdapterOutcome) {
        record.environment = outcome.environment.rawValue
        record.transactionIds = outcome.transactions.map(\.transactionId)
        record.productIds = Array(Set(outcome.transactions.map(\.productId))).sorted()
    }

    /// The record of an answer whose verdict is `verdict`.
    func answered(_ verdict: AuditVerdict) -> AuditRecord { completed(verdict, nil) }

    /// The record of a refusal.
    func refused(_ code: VerificationError.Code) -> AuditRecord { completed(.refused, code) }

    private func completed(_ verdict: AuditVerdict, _ code: VerificationError.Code?) -> AuditRecord {
        var done = record
        done.verdict = verdict
        done.errorCode = code
        done.appleStatus = appleAnswers.summary
        done.latencyMicros = Int64((DispatchTime.now().uptimeNanoseconds - started) / 1000)
        return done
    }
}

import Foundation
import IAPCore

/// Builds the ASN.1 payload of a legacy app receipt (Apple's "Receipt Fields" layout) and signs it
/// as PKCS#7 with the simulator's chain.
public struct ReceiptBuilder: Sendable {
    /// One in-app record (types 1701…1721).
    public struct InApp: Sendable {
        public var quantity: Int64
        public var productId: String
        public var transactionId: String
        public var originalTransactionId: String
        public var purchaseDate: Int64
        public var originalPurchaseDate: Int64
        public var expiresDate: Int64?
        public var webOrderLineItemId: Int64?
        public var cancellationDate: Int64?
        public var isTrialPeriod: Bool
        public var isInIntroOfferPeriod: Bool
        public var promotionalOfferId: String?
    }

    public var receiptType: String
    public var appItemId: Int64
    public var bundleId: String
    public var appVersion: String
    public var originalAppVersion: String
    public var creationDate: Int64
    public var originalPurchaseDate: Int64
    public var inApps: [InApp]
    /// The app download this receipt belongs to (verifyReceipt's `download_id`); nil: none recorded.
    public var downloadId: Int64? = nil

    /// The DER payload: a SET OF SEQUENCE { type, version, value }.
    public func payload() -> [UInt8] {
        var members: [[UInt8]] = [
            Self.attribute(0, DER.utf8String(receiptType)),
            Self.attribute(1, DER.integer(appItemId)),
            Self.attribute(2, DER.utf8String(bundleId)),
            Self.attribute(3, DER.utf8String(appVersion)),
            // Opaque value and SHA-1 hash: Apple's are device-bound; ours only need to be present.
            // The opaque value also carries the download, as Apple's server knows it for its answer.
            Self.attribute(4, SHA1Placeholder.opaque(bundleId, downloadId: downloadId)),
            Self.attribute(5, [UInt8](repeating: 0, count: 20)),
            Self.attribute(12, DER.ia5String(Self.rfc3339(creationDate))),
            Self.attribute(18, DER.ia5String(Self.rfc3339(originalPurchaseDate))),
            Self.attribute(19, DER.utf8String(originalAppVersion)),
        ]
        for record in inApps { members.append(Self.attribute(17, Self.inAppSet(record))) }
        return DER.set(members)
    }

    public func signed(with pki: SimulatorPKI) throws -> [UInt8] { try pki.signPKCS7(payload()) }

    static func inAppSet(_ r: InApp) -> [UInt8] {
        var members: [[UInt8]] = [
            attribute(1701, DER.integer(r.quantity)),
            attribute(1702, DER.utf8String(r.productId)),
            attribute(1703, DER.utf8String(r.transactionId)),
            attribute(1704, DER.ia5String(rfc3339(r.purchaseDate))),
            attribute(1705, DER.utf8String(r.originalTransactionId)),
            attribute(1706, DER.ia5String(rfc3339(r.originalPurchaseDate))),
            attribute(1708, DER.ia5String(r.expiresDate.map(rfc3339) ?? "")),
            attribute(1712, DER.ia5String(r.cancellationDate.map(rfc3339) ?? "")),
            attribute(1713, DER.integer(r.isTrialPeriod ? 1 : 0)),
            attribute(1719, DER.integer(r.isInIntroOfferPeriod ? 1 : 0)),
        ]
        if let w = r.webOrderLineItemId { members.append(attribute(1711, DER.integer(w))) }
        if let p = r.promotionalOfferId { members.append(attribute(1721, DER.utf8String(p))) }
        return DER.set(members)
    }

    static func attribute(_ type: Int64, _ value: [UInt8]) -> [UInt8] {
        DER.sequence([DER.integer(type), DER.integer(1), DER.octetString(value)])
    }

    /// `2024-02-23T17:27:16Z`, as Apple writes receipt dates (second precision).
    static func rfc3339(_ ms: Int64) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd'T'HH:mm:ss'Z'"
        return f.string(from: Date(timeIntervalSince1970: Double(ms / 1000)))
    }
}

/// A stable per-app (or, with a recorded app download, per-download) stand-in for the
/// device-bound opaque value.
enum SHA1Placeholder {
    static let downloadMark = "download:"

    static func opaque(_ seed: String, downloadId: Int64? = nil) -> [UInt8] {
        if let downloadId { return Array((downloadMark + String(downloadId)).utf8) }
        var bytes = Array(seed.utf8.prefix(16))
        while bytes.count < 16 { bytes.append(0) }
        return bytes
    }

    /// The download an opaque value of ours carries; 0 (as in Apple's sandbox answers) when none.
    static func downloadId(opaque: [UInt8]?) -> Int64 {
        guard let opaque, let text = String(bytes: opaque, encoding: .utf8), text.hasPrefix(downloadMark) else { return 0 }
        return Int64(text.dropFirst(downloadMark.count)) ?? 0
    }
}

extension ReceiptBuilder.InApp {
    init(_ t: TransactionRecord) {
        self.init(quantity: t.quantity, productId: t.productId, transactionId: t.transactionId,
                  originalTransactionId: t.originalTransactionId, purchaseDate: t.purchaseDate,
                  originalPurchaseDate: t.originalPurchaseDate, expiresDate: t.expiresDate,
                  webOrderLineItemId: t.webOrderLineItemId.flatMap { Int64($0) }, cancellationDate: t.revocationDate,
                  isTrialPeriod: t.isTrialPeriod, isInIntroOfferPeriod: t.isInIntroOfferPeriod,
                  promotionalOfferId: { if case .promotional(let id, _) = t.offer { id } else { nil } }())
    }
}

import IAPCore

/// One in-app purchase of a legacy receipt (attribute 17 of an app receipt, or the purchase-info
/// of an iOS 6 `transactionReceipt`). Dates are Unix milliseconds. Every field Apple documents is
/// typed; `attributes` keeps every attribute as found, documented or not.
public struct InAppPurchaseRecord: Hashable, Sendable {
    public var quantity: Int64?
    public var productId: String?
    public var transactionId: String?
    public var originalTransactionId: String?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var webOrderLineItemId: Int64?
    public var cancellationDate: Int64?
    /// 1713: the subscription is in its free trial.
    public var isTrialPeriod: Bool?
    /// 1719: the subscription is in an introductory price period.
    public var isInIntroOfferPeriod: Bool?
    /// 1721: the promotional offer redeemed.
    public var promotionalOfferId: String?
    /// Every attribute as found, in order (empty for an iOS 6 transaction receipt).
    public var attributes: [ReceiptAttribute] { attributeList.attributes }
    var attributeList = AttributeList()

    public init() {}

    /// The attribute numbers this type reads into typed fields.
    public enum Field {
        public static let quantity: Int64 = 1701
        public static let productId: Int64 = 1702
        public static let transactionId: Int64 = 1703
        public static let purchaseDate: Int64 = 1704
        public static let originalTransactionId: Int64 = 1705
        public static let originalPurchaseDate: Int64 = 1706
        public static let expiresDate: Int64 = 1708
        public static let webOrderLineItemId: Int64 = 1711
        public static let cancellationDate: Int64 = 1712
        public static let isTrialPeriod: Int64 = 1713
        public static let isInIntroOfferPeriod: Int64 = 1719
        public static let promotionalOfferId: Int64 = 1721
        static let typed: Set<Int64> = [quantity, productId, transactionId, purchaseDate, originalTransactionId,
                                        originalPurchaseDate, expiresDate, webOrderLineItemId, cancellationDate,
                                        isTrialPeriod, isInIntroOfferPeriod, promotionalOfferId]
        /// `typed.contains(type)` without hashing (runs for every attribute of every record).
        static func isTyped(_ type: Int64) -> Bool {
            switch type {
            case quantity, productId, transactionId, purchaseDate, originalTransactionId, originalPurchaseDate,
                 expiresDate, webOrderLineItemId, cancellationDate, isTrialPeriod, isInIntroOfferPeriod,
                 promotionalOfferId: true
            default: false
            }
        }
    }

    /// Reads the nested SET of one in-app attribute (`range` of the payload `bytes`). A documented
    /// field with the wrong type is MALFORMED_RECEIPT; a field given twice is refused rather than
    /// resolved by "last one wins".
    ///
    /// Reads into this new record where it is kept: a record returned by value and then appended
    /// was copied (a retain and a release per field, for each of a receipt's records).
    mutating func read(_ bytes: [UInt8], in range: Range<Int>) throws(VerificationError) {
        let context = "in-app"
        let list = try AttributeList.read(bytes, in: range, context: context)
        self.attributeList = list
        try list.forEach(context, refusingRepeatsOf: Field.isTyped) { (i, type) throws(VerificationError) in
            switch type {
            case Field.quantity: self.quantity = try list.integer(i, context)
            case Field.productId: self.productId = try list.string(i, context)
            case Field.transactionId: self.transactionId = try list.string(i, context)
            case Field.originalTransactionId: self.originalTransactionId = try list.string(i, context)
            case Field.purchaseDate: self.purchaseDate = try list.date(i, context)
            case Field.originalPurchaseDate: self.originalPurchaseDate = try list.date(i, context)
            case Field.expiresDate: self.expiresDate = try list.date(i, context)
            case Field.cancellationDate: self.cancellationDate = try list.date(i, context)
            case Field.webOrderLineItemId: self.webOrderLineItemId = try list.integer(i, context)
            case Field.isTrialPeriod: self.isTrialPeriod = try list.integer(i, context) != 0
            case Field.isInIntroOfferPeriod: self.isInIntroOfferPeriod = try list.integer(i, context) != 0
            case Field.promotionalOfferId:
                let s = try list.string(i, context)
                self.promotionalOfferId = s.isEmpty ? nil : s
            default: break
            }
        }
    }
}

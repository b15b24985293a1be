import IAPCore

/// The payload of a legacy app receipt, as parsed: typed fields for what Apple documents, every
/// attribute kept raw, and every in-app record (none dropped or deduplicated).
public struct AppReceipt: Hashable, Sendable {
    /// 0: "Production", "ProductionSandbox", "Xcode", ...
    public var receiptType: String?
    /// 1: app item id (0 in sandbox).
    public var appItemId: Int64?
    public var bundleId: String?
    public var appVersion: String?
    public var opaque: [UInt8]?
    public var sha1Hash: [UInt8]?
    /// Unix milliseconds.
    public var creationDate: Int64?
    public var originalPurchaseDate: Int64?
    public var originalAppVersion: String?
    public var expirationDate: Int64?
    public var inAppPurchases: [InAppPurchaseRecord] = []
    /// Every top-level attribute as found, in order, in-app records included.
    public var attributes: [ReceiptAttribute] { attributeList.attributes }
    var attributeList = AttributeList()

    public init() {}

    public enum Field {
        public static let receiptType: Int64 = 0
        public static let appItemId: Int64 = 1
        public static let bundleId: Int64 = 2
        public static let appVersion: Int64 = 3
        public static let opaque: Int64 = 4
        public static let sha1Hash: Int64 = 5
        public static let creationDate: Int64 = 12
        public static let inAppPurchase: Int64 = 17
        public static let originalPurchaseDate: Int64 = 18
        public static let originalAppVersion: Int64 = 19
        public static let expirationDate: Int64 = 21
        static let documentedSingle: Set<Int64> = [receiptType, appItemId, bundleId, appVersion, opaque, sha1Hash,
                                                   creationDate, originalPurchaseDate, originalAppVersion, expirationDate]
        /// `documentedSingle.contains(type)` without hashing.
        static func isDocumentedSingle(_ type: Int64) -> Bool {
            switch type {
            case receiptType, appItemId, bundleId, appVersion, opaque, sha1Hash, creationDate, originalPurchaseDate,
                 originalAppVersion, expirationDate: true
            default: false
            }
        }
    }

    /// Xcode's StoreKit Testing signs receipts with a local self-signed key.
    public var isXcodeReceipt: Bool { receiptType == "Xcode" }

    /// Parses the receipt payload (the SET of attributes inside the PKCS#7 content).
    public static func parsePayload(_ bytes: [UInt8]) throws(VerificationError) -> AppReceipt {
        let context = "receipt"
        var receipt = AppReceipt()
        let list = try AttributeList.read(bytes, in: bytes.indices, context: context)
        receipt.attributeList = list
        var inAppCount = 0
        for a in list.spans where a.type == Field.inAppPurchase { inAppCount += 1 }
        receipt.inAppPurchases.reserveCapacity(inAppCount)
        try list.forEach(context, refusingRepeatsOf: Field.isDocumentedSingle) { (i, type) throws(VerificationError) in
            switch type {
            case Field.receiptType: receipt.receiptType = try list.string(i, context)
            case Field.appItemId: receipt.appItemId = try list.integer(i, context)
            case Field.bundleId: receipt.bundleId = try list.string(i, context)
            case Field.appVersion: receipt.appVersion = try list.string(i, context)
            case Field.opaque: receipt.opaque = list.rawValue(i)
            case Field.sha1Hash: receipt.sha1Hash = list.rawValue(i)
            case Field.creationDate: receipt.creationDate = try list.date(i, context)
            case Field.originalPurchaseDate: receipt.originalPurchaseDate = try list.date(i, context)
            case Field.originalAppVersion: receipt.originalAppVersion = try list.string(i, context)
            case Field.expirationDate: receipt.expirationDate = try list.date(i, context)
            case Field.inAppPurchase:
                receipt.inAppPurchases.append(InAppPurchaseRecord())
                try receipt.inAppPurchases[receipt.inAppPurchases.count - 1].read(bytes, in: list.spans[i].value)
            default: break
            }
        }
        return receipt
    }

    /// Parses a whole receipt (PKCS#7 DER/BER bytes) WITHOUT checking its signature: everything
    /// in the result, transaction ids included, is an unverified claim. For fuzzing and
    /// inspection; use `ReceiptVerifier` or `AppReceiptReader` to decide anything.
    public static func parseUnverified(pkcs7 bytes: [UInt8]) throws(VerificationError) -> AppReceipt {
        try parsePayload(try PKCS7SignedData.parse(bytes).content)
    }

    /// Every transaction id and original transaction id, in record order, without repeats.
    public var allTransactionIds: [String] {
        var seen = Set<String>()
        var ids: [String] = []
        for record in inAppPurchases {
            for id in [record.transactionId, record.originalTransactionId].compactMap({ $0 }) where !id.isEmpty {
                if seen.insert(id).inserted { ids.append(id) }
            }
        }
        return ids
    }
}

/// The parts of a PKCS#7 ContentInfo → SignedData a receipt parser needs: the signed content.
/// OpenSSL checks the signature separately; `ReceiptVerifier` then requires that the content
/// OpenSSL verified is byte for byte the content parsed here.
public struct PKCS7SignedData: Sendable {
    public static let signedDataOID = "1.2.840.113549.1.7.2"
    public static let dataOID = "1.2.840.113549.1.7.1"

    public let content: [UInt8]
    /// Where the signer's part lies in the parsed bytes, when it has exactly the shape Apple signs;
    /// nil for any other shape (which OpenSSL alone then verifies).
    let signer: SignerRanges?

    /// The parts of a SignedData with definite lengths, content in one primitive OCTET STRING,
    /// certificates, no CRLs and exactly one SignerInfo without authenticated or unauthenticated
    /// attributes: then the signature is over the content itself, and these bytes (with the pinned
    /// store) decide everything OpenSSL checks except the validity time and the signature value.
    /// The content's shape is not in the cache key, so it must be one OpenSSL's parser cannot
    /// refuse: a constructed (BER) OCTET STRING may nest deeper than OpenSSL accepts.
    struct SignerRanges {
        /// The `certificates [0]` element, whole.
        let certificates: Range<Int>
        /// The `digestAlgorithms` SET, whole.
        let digestAlgorithms: Range<Int>
        /// The SignerInfo from its version to its digestEncryptionAlgorithm: which certificate
        /// signs (issuer and serial) and with which algorithms.
        let signerIdentity: Range<Int>
        /// The SignerInfo's digestAlgorithm OBJECT IDENTIFIER element, whole.
        let digestOID: Range<Int>
        /// The contents of `encryptedDigest`: the signature value.
        let signature: Range<Int>
    }

    public static func parse(_ bytes: [UInt8]) throws(VerificationError) -> PKCS7SignedData {
        var top = try DERReader(bytes)
        let contentInfo = try top.read(.sequence, "ContentInfo")
        try top.finish("ContentInfo")
        var wrapper = try explicitContent(of: contentInfo, "ContentInfo", type: "contentType", signedDataOID, content: "SignedData [0]") {
            "receipt is not PKCS#7 SignedData (content type \($0))"
        }
        let signedData = try wrapper.read(.sequence, "SignedData")
        try wrapper.finish("SignedData [0]")

        var sd = try signedData.children()
        _ = try sd.read(.integer, "SignedData version").integer()
        let digestAlgorithms = try sd.read(.set, "digestAlgorithms")
        let encap = try sd.read(.sequence, "encapContentInfo")
        let certificates = try sd.readIfPresent(.context(0))
        let crls = try sd.readIfPresent(.context(1))
        let signerInfos = try sd.read(.set, "signerInfos")
        try sd.finish("SignedData")

        var octets = try explicitContent(of: encap, "encapContentInfo", type: "eContentType", dataOID, content: "eContent [0]") {
            "receipt content is not PKCS#7 data (type \($0))"
        }
        guard let payload = try octets.next() else { throw VerificationError(.malformedReceipt, "receipt has no content") }
        try octets.finish("eContent")
        let appleShape = crls == nil && payload.tag == .octetString && !payload.indefiniteLength
        let signer = appleShape ? certificates.flatMap { Self.signerRanges(digestAlgorithms, $0, signerInfos) } : nil
        return PKCS7SignedData(content: try payload.octetString(), signer: signer)
    }

    /// The content of a ContentInfo-shaped SEQUENCE (a type OBJECT IDENTIFIER, then `[0] EXPLICIT`
    /// content), as a reader of what the `[0]` holds; refused unless the type is `expected`.
    private static func explicitContent(of sequence: DERElement, _ name: String, type typeName: String, _ expected: String,
                                        content contentName: String,
                                        refusal: (String) -> String) throws(VerificationError) -> DERReader {
        var fields = try sequence.children()
        let type = try fields.read(.objectIdentifier, typeName).objectIdentifier()
        guard type == expected else { throw VerificationError(.malformedReceipt, refusal(type)) }
        let content = try fields.read(.context(0), contentName)
        try fields.finish(name)
        return try content.children()
    }

    /// The signer's ranges when the SignedData has Apple's shape (see `SignerRanges`); nil otherwise,
    /// never an error: what does not have this shape is left to OpenSSL to decide.
    private static func signerRanges(_ digestAlgorithms: DERElement, _ certificates: DERElement,
                                     _ signerInfos: DERElement) -> SignerRanges? {
        func whole(_ e: DERElement) -> Range<Int>? { e.indefiniteLength ? nil : e.offset..<e.contentRange.upperBound }
        guard var infos = try? signerInfos.children(), let info = try? infos.next(), infos.isAtEnd,
              info.tag == .sequence, var fields = try? info.children(),
              let version = try? fields.read(.integer, "version"),
              (try? fields.read(.sequence, "issuerAndSerialNumber")) != nil,
              let digestAlgorithm = try? fields.read(.sequence, "digestAlgorithm"),
              let encryptionAlgorithm = try? fields.read(.sequence, "digestEncryptionAlgorithm"),
              let signature = try? fields.read(.octetString, "encryptedDigest"), fields.isAtEnd,
              var algorithm = try? digestAlgorithm.children(), let oid = try? algorithm.read(.objectIdentifier, "OID"),
              let certificatesRange = whole(certificates), let digestAlgorithmsRange = whole(digestAlgorithms),
              let identityEnd = whole(encryptionAlgorithm)?.upperBound, whole(info) != nil,
              let digestOID = whole(oid) else { return nil }
        return SignerRanges(certificates: certificatesRange, digestAlgorithms: digestAlgorithmsRange,
                            signerIdentity: version.offset..<identityEnd, digestOID: digestOID,
                            signature: signature.contentRange)
    }
}

/// The documented attribute types already seen in one SET. Documented types are small numbers
/// (0...21 and 1701...1721), so a bitmask replaces a hashed `Set<Int64>` per record; any other
/// type falls back to the set, so the answer is always exactly set membership.
struct DocumentedFieldSet {
    private var low: UInt64 = 0
    private var inApp: UInt64 = 0
    private var others: Set<Int64> = []

    /// Inserts `type`; false when it was already there.
    mutating func insert(_ type: Int64) -> Bool {
        if type >= 0 && type < 64 {
            let bit: UInt64 = 1 << UInt64(type)
            defer { low |= bit }
            return low & bit == 0
        }
        if type >= 1700 && type < 1764 {
            let bit: UInt64 = 1 << UInt64(type - 1700)
            defer { inApp |= bit }
            return inApp & bit == 0
        }
        return others.insert(type).inserted
    }
}

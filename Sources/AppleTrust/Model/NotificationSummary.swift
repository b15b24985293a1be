import IAPCore

/// The `summary` object of a V2 notification (renewal-date extension results).
public struct NotificationSummary: Sendable, Hashable {
    public let environment: AppStoreEnvironment?
    public let appAppleId: Int64?
    public let bundleId: String?
    public let productId: String?
    public let requestIdentifier: String?
    public let storefrontCountryCodes: [String]
    public let succeededCount: Int64?
    public let failedCount: Int64?

    public init(_ f: JSONFields) throws(VerificationError) {
        environment = try f.open("environment")
        appAppleId = try f.int64("appAppleId")
        bundleId = try f.string("bundleId")
        productId = try f.string("productId")
        requestIdentifier = try f.string("requestIdentifier")
        var codes: [String] = []
        for v in try f.array("storefrontCountryCodes") ?? [] {
            guard let s = v.stringValue else {
                throw VerificationError(.invalidFieldType, "summary.storefrontCountryCodes must hold strings")
            }
            codes.append(s)
        }
        storefrontCountryCodes = codes
        succeededCount = try f.int64("succeededCount")
        failedCount = try f.int64("failedCount")
    }
}

extension NotificationSummary: Decodable {
    /// Read by hand, not synthesized: an absent `storefrontCountryCodes` is an empty list, not a
    /// missing member.
    public init(from decoder: any Decoder) throws { try self.init(JSONFields(decoder)) }
}

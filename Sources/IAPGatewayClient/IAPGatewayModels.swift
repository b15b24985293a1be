import Foundation

/// A single-use nonce for one receipt verification of one account.
public struct IAPGatewayNonce: Sendable, Equatable, Decodable {
    public let nonce: String
    public let expiresAt: Date

    enum CodingKeys: String, CodingKey { case nonce, expiresAt }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        nonce = try c.decode(String.self, forKey: .nonce)
        expiresAt = try c.decodeMillis(.expiresAt)
    }
}

/// Purchase evidence, as the app sent it to its backend: the verify body member that carries it and
/// the members that go with it. Open: the kinds below are the gateway's built-in ones; evidence an
/// added adapter verifies is `init(member:value:companions:)` with the member its form declares
/// (the gateway's OpenAPI document lists them).
public struct IAPGatewayEvidence: Sendable, Equatable {
    /// The request member holding the evidence (`receipt`, `transactionId`, `signedTransaction`, …).
    public let member: String
    public let value: String
    /// Members sent beside it (a receipt's `nonce`).
    public let companions: [String: String]

    public init(member: String, value: String, companions: [String: String] = [:]) {
        self.member = member
        self.value = value
        self.companions = companions
    }

    /// An old app's base64 App Store receipt, with a nonce from `nonce(account:)` (one attempt per nonce).
    public static func receipt(_ base64: String, nonce: String?) -> Self {
        Self(member: "receipt", value: base64, companions: nonce.map { ["nonce": $0] } ?? [:])
    }
    /// A transaction id (StoreKit 2 `Transaction.id`), looked up with Apple's Server API.
    public static func transactionId(_ id: String) -> Self { Self(member: "transactionId", value: id) }
    /// StoreKit 2's `VerificationResult.jwsRepresentation`.
    public static func signedTransaction(_ jws: String) -> Self { Self(member: "signedTransaction", value: jws) }

    var members: [String: String] { companions.merging([member: value]) { _, evidence in evidence } }
}

/// The adapter that answered a verification (`verifyReceipt`, `serverAPI`, or one a gateway added):
/// an open value, so an id this client does not know still decodes.
public struct IAPGatewayAdapter: RawRepresentable, Hashable, Sendable, Decodable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public var description: String { rawValue }

    /// Apple's legacy verifyReceipt endpoint.
    public static let verifyReceipt = Self(rawValue: "verifyReceipt")
    /// The App Store Server API.
    public static let serverAPI = Self(rawValue: "serverAPI")
}

/// The gateway's verify answer (README, "Verdict").
public struct IAPGatewayVerification: Sendable, Equatable, Decodable {
    public enum Verdict: String, Sendable, Decodable {
        /// At least one purchase of the evidence grants access now: unlock, then finish the transaction.
        case granted
        /// Genuine and bound to the account, but nothing in it grants access now (expired, say).
        case notGranted
    }

    public let account: String
    public let verdict: Verdict
    /// The adapter whose outcome answered (nil from a gateway that does not say).
    public let adapter: IAPGatewayAdapter?
    /// `Production` or `Sandbox` (or `Xcode` / `LocalTesting` where a policy allows them).
    public let environment: String
    public let transactions: [IAPGatewayTransaction]
    /// Transactions granted by this call (credit consumables for these alone) and by earlier ones.
    public let newlyGranted: [String]
    public let alreadyGranted: [String]
    /// Refunded or revoked purchases of a receipt that still holds a live one.
    public let revoked: [String]
    public let entitlements: [IAPGatewayEntitlement]
}

/// A purchase as the gateway normalised it (the fields a backend acts on; see the OpenAPI document for all).
public struct IAPGatewayTransaction: Sendable, Equatable, Decodable {
    public let transactionId: String
    public let originalTransactionId: String?
    public let productId: String
    /// Apple's type: `Auto-Renewable Subscription`, `Non-Consumable`, `Consumable`, `Non-Renewing Subscription`.
    public let type: String?
    public let quantity: Int?
    public let purchaseDate: Date?
    public let expiresDate: Date?
    public let revocationDate: Date?
    public let appAccountToken: String?

    enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, productId, type, quantity, purchaseDate, expiresDate, revocationDate,
             appAccountToken
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        transactionId = try c.decode(String.self, forKey: .transactionId)
        originalTransactionId = try c.decodeIfPresent(String.self, forKey: .originalTransactionId)
        productId = try c.decode(String.self, forKey: .productId)
        type = try c.decodeIfPresent(String.self, forKey: .type)
        quantity = try c.decodeIfPresent(Int.self, forKey: .quantity)
        purchaseDate = try c.decodeMillisIfPresent(.purchaseDate)
        expiresDate = try c.decodeMillisIfPresent(.expiresDate)
        revocationDate = try c.decodeMillisIfPresent(.revocationDate)
        appAccountToken = try c.decodeIfPresent(String.self, forKey: .appAccountToken)
    }
}

/// What an account holds for one purchase chain, judged at the time of the answer.
public struct IAPGatewayEntitlement: Sendable, Equatable, Decodable {
    public let productId: String
    public let originalTransactionId: String
    /// `active`, `gracePeriod`, `billingRetry`, `expired`, `refunded`, `revoked`, `credited` (a consumable:
    /// credit it for `newlyGranted`; it grants no lasting access), ...
    public let state: String
    /// Whether to unlock now, under the app's grace-period policy. Act on this, not on `state`.
    public let grantsAccess: Bool
    public let expiresDate: Date?

    enum CodingKeys: String, CodingKey { case productId, originalTransactionId, state, grantsAccess, expiresDate }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        productId = try c.decode(String.self, forKey: .productId)
        originalTransactionId = try c.decode(String.self, forKey: .originalTransactionId)
        state = try c.decode(String.self, forKey: .state)
        grantsAccess = try c.decode(Bool.self, forKey: .grantsAccess)
        expiresDate = try c.decodeMillisIfPresent(.expiresDate)
    }
}

/// The support history of one account (`GET .../accounts/{account}/history`).
public struct IAPGatewayHistory: Sendable, Equatable, Decodable {
    /// One verification attempt, as the gateway's audit trail recorded it (never the evidence).
    public struct Attempt: Sendable, Equatable, Decodable {
        /// Milliseconds since 1970.
        public let time: Int64
        public let requestId: String?
        public let evidenceKind: String
        /// The first 16 hex digits of the evidence's SHA-256.
        public let evidenceSHA256Prefix: String
        public let clientVersion: String?
        public let environment: String?
        /// What Apple answered: verifyReceipt's statuses ("21007 0") or the Server API's failure.
        public let appleStatus: String?
        /// "granted" or "notGranted" (a 200's verdict), or "refused" (`code` says why).
        public let verdict: String
        /// The gateway's error code of a refusal.
        public let code: String?
        public let transactionIds: [String]
    }

    /// One purchase chain the account owns.
    public struct Chain: Sendable, Equatable, Decodable {
        public struct Grant: Sendable, Equatable, Decodable {
            public let transactionId: String
            public let productId: String
            /// Milliseconds since 1970; set on a refunded or revoked transaction.
            public let revocationDate: Int64?
        }
        public struct Notification: Sendable, Equatable, Decodable {
            public let notificationType: String
            public let subtype: String?
            /// "processed", "parked" or "pending".
            public let status: String
        }
        public let originalTransactionId: String
        public let owner: String
        public let grants: [Grant]
        public let entitlement: IAPGatewayEntitlement?
        public let notifications: [Notification]
    }

    public let attempts: [Attempt]
    public let chains: [Chain]
    /// More attempts matched than the limit: the oldest were left out.
    public let truncated: Bool
}

/// What support learns from an order ID a customer quotes (`GET .../orders/{orderId}`): Apple's
/// transactions of the order, each verified and with the account here that owns its purchase.
public struct IAPGatewayOrder: Sendable, Equatable, Decodable {
    public struct Item: Sendable, Equatable, Decodable {
        public let transaction: IAPGatewayTransaction
        /// The account its purchase chain is bound to; nil when no account of this gateway claimed it.
        public let owner: String?
    }
    /// One owner's support history, once per account.
    public struct Account: Sendable, Equatable, Decodable {
        public let account: String
        public let attempts: [IAPGatewayHistory.Attempt]
        public let chains: [IAPGatewayHistory.Chain]
        public let truncated: Bool
    }
    public let orderId: String
    /// Where Apple knew the order ("Production", "Sandbox").
    public let environment: String
    public let transactions: [Item]
    public let accounts: [Account]
}

struct EntitlementsAnswer: Decodable {
    let entitlements: [IAPGatewayEntitlement]
}

struct ErrorEnvelope: Decodable {
    struct Body: Decodable {
        let code: String
        let message: String
        let retryable: Bool
        let requestId: String?
    }
    let error: Body
}

/// The gateway's dates are milliseconds since 1970, as Apple's are.
extension KeyedDecodingContainer {
    func decodeMillis(_ key: Key) throws -> Date {
        Date(timeIntervalSince1970: Double(try decode(Int64.self, forKey: key)) / 1000)
    }

    func decodeMillisIfPresent(_ key: Key) throws -> Date? {
        try decodeIfPresent(Int64.self, forKey: key).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }
}

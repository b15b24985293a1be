import IAPCore

/// Which App Store Server API host answered (production or sandbox).
public enum ServerAPIEnvironment: String, Sendable, Equatable {
    case production = "Production"
    case sandbox = "Sandbox"

    public var appStoreEnvironment: AppStoreEnvironment { self == .production ? .production : .sandbox }
}

/// Which hosts a lookup may ask, in order. Apple's advice: ask production first, and sandbox only
/// when production does not know the transaction (and, here, only when the caller allows Sandbox).
public enum ServerAPIEnvironmentOrder: Sendable, Equatable {
    case productionOnly
    case productionThenSandbox
    case sandboxOnly

    var environments: [ServerAPIEnvironment] {
        switch self {
        case .productionOnly: [.production]
        case .productionThenSandbox: [.production, .sandbox]
        case .sandboxOnly: [.sandbox]
        }
    }

    public static func only(_ environment: ServerAPIEnvironment) -> Self {
        environment == .production ? .productionOnly : .sandboxOnly
    }
}

// Results hold Apple's JSON as received plus the signed strings, unverified: verifying them is the
// adapter's job (the client never decides what is trusted).

/// Get Transaction Info.
public struct TransactionInfoResponse: Sendable {
    public let environment: ServerAPIEnvironment
    public let raw: JSONValue
    public let signedTransactionInfo: String
}

/// Get Transaction History (v2), every page collected.
public struct TransactionHistoryResponse: Sendable {
    public let environment: ServerAPIEnvironment
    public let rawPages: [JSONValue]
    public let signedTransactions: [String]
    /// The revision to resume from later.
    public let revision: String?
    /// False when the page cap stopped the paging while Apple still had more.
    public let isComplete: Bool
}

/// One item of `data[].lastTransactions[]` in Get All Subscription Statuses.
public struct LastTransactionsItem: Sendable, Equatable {
    /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
    public let status: Int64?
    public let originalTransactionId: String
    public let signedTransactionInfo: String
    public let signedRenewalInfo: String?
}

public struct SubscriptionGroupStatus: Sendable, Equatable {
    public let subscriptionGroupIdentifier: String?
    public let lastTransactions: [LastTransactionsItem]
}

/// Get All Subscription Statuses.
public struct SubscriptionStatusesResponse: Sendable {
    public let environment: ServerAPIEnvironment
    public let raw: JSONValue
    public let data: [SubscriptionGroupStatus]
}

/// Look Up Order ID. `status` 0 is a valid order, 1 an invalid one.
public struct OrderLookupResponse: Sendable {
    public let environment: ServerAPIEnvironment
    public let raw: JSONValue
    public let status: Int64
    public let signedTransactions: [String]
}

/// Request a Test Notification.
public struct TestNotificationResponse: Sendable {
    public let environment: ServerAPIEnvironment
    public let raw: JSONValue
    public let testNotificationToken: String
}

/// One page of Get Notification History.
public struct NotificationHistoryResponse: Sendable {
    public struct Item: Sendable {
        public let signedPayload: String
        public let raw: JSONValue
    }
    public let environment: ServerAPIEnvironment
    public let raw: JSONValue
    public let notificationHistory: [Item]
    public let hasMore: Bool
    public let paginationToken: String?
}

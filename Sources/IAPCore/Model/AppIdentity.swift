/// The identity an app's evidence must state, as plain values: the bundle id, the App Store's id of
/// the app (nil: not configured), and the environments one claim may come from.
///
/// `check` is the one rule for bundle id, app id and environment. `SignedDataVerifier` is given an
/// identity at construction, as Apple's own verifier is given bundle id, app id and environment, and
/// holds every payload Apple signs to it; the gateway's claim policy holds what no verifier reads
/// (verifyReceipt's answers, V1 notification bodies) and each claim's narrower identity (Sandbox
/// only for App Review accounts) to the same rule. Nothing else decides these three.
public struct AppIdentity: Sendable, Hashable {
    public var bundleId: String
    public var appAppleId: Int64?
    /// Xcode and LocalTesting are members only where local test data is accepted at all.
    public var environments: Set<AppStoreEnvironment>

    public init(bundleId: String, appAppleId: Int64?, environments: Set<AppStoreEnvironment>) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environments = environments
    }

    /// Production where it is accepted, else Sandbox: the environment asked first where none is
    /// known, and the one whose verdict is the app's.
    public var primaryEnvironment: AppStoreEnvironment { environments.contains(.production) ? .production : .sandbox }

    /// Refuses evidence that is not this app's, or comes from an environment it may not come from.
    /// Bundle, then app id, then environment: the most useful refusal first. A member the kind of
    /// evidence always states (`stated.kind`) and does not is refused as that member's mismatch
    /// (an environment as missing): absent is never read as "this app".
    public func check(_ stated: EvidenceIdentity) throws(VerificationError) {
        if let bundle = stated.bundleId {
            guard bundle == bundleId else {
                throw VerificationError(.bundleIdMismatch, "evidence is for bundle \"\(ClientExcerpt.of(bundle, limit: 200))\", not \"\(bundleId)\"")
            }
        } else if stated.kind.always.contains(.bundleId) {
            throw VerificationError(.bundleIdMismatch, "the \(stated.kind.name) names no bundle; \(bundleId) expected")
        }
        try checkAppAppleId(stated)
        guard let environment = stated.environment else {
            guard !stated.kind.always.contains(.environment) else {
                throw VerificationError(.missingField, "the \(stated.kind.name) names no environment")
            }
            return
        }
        // An App Store server (verifyReceipt, V1 notifications) answers from Production or Sandbox only.
        let possible = stated.kind.always.contains(.storeEnvironment) ? environments.intersection([.production, .sandbox]) : environments
        guard possible.contains(environment) else {
            throw VerificationError(environment.isLocalTest && !stated.kind.always.contains(.storeEnvironment) ? .testEnvironmentNotAllowed : .environmentNotAllowed,
                                    "\(ClientExcerpt.of(environment.rawValue)) evidence is not accepted for \(bundleId)")
        }
    }

    /// Apple assigns app ids in Production only: outside it evidence states none or 0 (Sandbox
    /// receipts), and 0 there is no statement, except from evidence that names its app by app id
    /// alone, which also needs an identity that knows it.
    private func checkAppAppleId(_ stated: EvidenceIdentity) throws(VerificationError) {
        let onlyByAppId = stated.kind.always.contains(.appAppleIdOnly)
        guard let expected = appAppleId else {
            if onlyByAppId {
                throw VerificationError(.appAppleIdMismatch, "the \(stated.kind.name) names only an app Apple id, and \(bundleId) has none configured")
            }
            return
        }
        switch stated.appAppleId {
        case let actual? where stated.environment == .production || actual != 0 || onlyByAppId:
            guard actual == expected else {
                throw VerificationError(.appAppleIdMismatch, "evidence is for app \(actual), not \(expected)")
            }
        case nil where stated.environment == .production && stated.kind.always.contains(.productionAppAppleId):
            throw VerificationError(.appAppleIdMismatch, "the Production \(stated.kind.name) names no app id; \(expected) expected")
        default:
            return
        }
    }
}

/// What evidence states about the app it is for, exactly as stated (nil: not stated), and what its
/// kind always states.
public struct EvidenceIdentity: Sendable, Hashable {
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment?
    public var kind: Kind

    public init(bundleId: String? = nil, appAppleId: Int64? = nil, environment: AppStoreEnvironment? = nil,
                kind: Kind = .partial) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
        self.kind = kind
    }

    /// A kind of evidence, and the members it always states (Apple's documentation of each), so
    /// that one missing is a refusal rather than "not stated". Apple's kinds are all listed here,
    /// so no other module makes one.
    public struct Kind: Sendable, Hashable {
        /// How a refusal names the evidence.
        public let name: String
        public let always: Always

        /// What an adapter read before asking Apple (a bundle id, an environment it is sent to).
        public static let partial = Self(name: "evidence", always: [])
        /// A receipt, as verifyReceipt answers about it or as read locally.
        public static let receipt = Self(name: "receipt", always: [.bundleId, .environment, .productionAppAppleId, .storeEnvironment])
        /// A signed transaction (JWSTransaction): Apple's model has no app id.
        public static let transaction = Self(name: "transaction", always: [.bundleId, .environment])
        /// A signed AppTransaction: its app id in Production, as Apple's verifier requires.
        public static let appTransaction = Self(name: "app transaction", always: [.bundleId, .environment, .productionAppAppleId])
        /// Renewal info: Apple's model names no app.
        public static let renewalInfo = Self(name: "renewal info", always: [.environment])
        /// A V2 notification's envelope (data, appData, summary or externalPurchaseToken): its app id
        /// in Production, as Apple's verifier requires.
        public static let notification = Self(name: "notification", always: [.bundleId, .environment, .productionAppAppleId])
        /// A V1 notification body (`bid`, `environment`), signed by nothing.
        public static let v1Notification = Self(name: "V1 notification", always: [.bundleId, .environment, .storeEnvironment])
        /// A Retention Messaging realtime request.
        public static let realtimeRequest = Self(name: "realtime request", always: [.environment, .appAppleIdOnly])
    }

    public struct Always: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let bundleId = Self(rawValue: 1 << 0)
        public static let environment = Self(rawValue: 1 << 1)
        /// The app's id, wherever the evidence is from Production.
        public static let productionAppAppleId = Self(rawValue: 1 << 2)
        /// The app is named by its app id alone (no bundle id).
        public static let appAppleIdOnly = Self(rawValue: 1 << 3)
        /// From an App Store server, which knows Production and Sandbox only.
        public static let storeEnvironment = Self(rawValue: 1 << 4)
    }
}

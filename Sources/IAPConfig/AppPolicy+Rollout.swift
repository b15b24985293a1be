import IAPCore

/// A receipt routing of `rollout`: a growing, sticky share of accounts (the cohort) answered by the
/// adapter migrated to, with the one migrated from compared beside it; everyone else answered as in
/// `shadow`. The plan is static (the app file); which step is current lives in the ledger, so every
/// instance routes one account the same way (`RolloutState`).
extension AppPolicy {
    public struct Rollout: Sendable, Equatable {
        /// One step of the plan: the cohort's share, and what must hold before the next step.
        public struct Step: Sendable, Equatable {
            /// The cohort's share of accounts, 1 to 100 %.
            public var percent: Int
            /// How long the step runs at least before it may advance.
            public var minimumDwellSeconds: Int64
            /// Distinct purchase chains compared since the step began, at least, before it may advance.
            public var minimumComparedChains: Int
        }

        /// The adapter migrated from (answers accounts outside the cohort) and the one migrated to.
        public var from: AdapterID = .verifyReceipt
        public var to: AdapterID = .serverAPI
        /// Ascending percentages.
        public var steps: [Step]
        /// Whether the gateway advances a step itself once its dwell and comparisons are met and its guard holds.
        public var autoAdvance = false
        /// How often the guard judges the current step (1 to 60 s).
        public var guardIntervalSeconds: Int64 = 60
        /// The share of purchase chains compared since the step began that must agree; nil: the
        /// app's `readiness.agreementThreshold`.
        public var agreementThreshold: Double?
        /// The share of comparisons since the step began in which the adapter migrated to may fail
        /// (codes the app's readiness explains excepted); nil: 1 − the agreement threshold.
        public var maximumFailureRate: Double?

        public static let defaultSteps = [1, 5, 25, 50, 100]
        public static let defaultDwellSeconds: Int64 = 3600
        public static let defaultComparedChains = 20

        public init(steps: [Step]) { self.steps = steps }

        /// How accounts outside the cohort are answered: as `shadow`.
        public var outsideCohort: RoutingMode { RoutingMode(answering: from, compared: (to, .shadow)) }
        /// How cohort accounts are answered: the adapter migrated to, the other compared beside it (shadow in reverse).
        public var insideCohort: RoutingMode { RoutingMode(answering: to, compared: (from, .cohort)) }

        /// The guard's thresholds, the app's readiness filling what the plan leaves out.
        public func agreement(_ readiness: Readiness) -> Double { agreementThreshold ?? readiness.agreementThreshold }
        public func failureRate(_ readiness: Readiness) -> Double { maximumFailureRate ?? (1 - agreement(readiness)) }

        /// `{from?, to?, steps?, minimumDwellSeconds?, minimumComparedChains?, autoAdvance?,
        /// guardIntervalSeconds?, agreementThreshold?, maximumFailureRate?}`; each step a percentage
        /// or `{percent, minimumDwellSeconds?, minimumComparedChains?}`.
        static func decode(_ field: ConfigField) throws(VerificationError) -> Rollout {
            let o = try field.object()
            let from = try o.optional("from").map { (f) throws(VerificationError) in AdapterID(rawValue: try f.nonEmptyString()) }
            let to = try o.optional("to").map { (f) throws(VerificationError) in AdapterID(rawValue: try f.nonEmptyString()) }
            let dwell = try o.optional("minimumDwellSeconds")?.integer(in: 0...31_536_000) ?? defaultDwellSeconds
            let chains = Int(try o.optional("minimumComparedChains")?.integer(in: 0...10_000_000) ?? Int64(defaultComparedChains))
            var steps: [Step] = []
            if let stepsField = o.optional("steps") {
                for item in try stepsField.array() {
                    steps.append(try decodeStep(item, dwell: dwell, chains: chains))
                    if steps.count > 1, steps[steps.count - 1].percent <= steps[steps.count - 2].percent {
                        throw item.fail("steps must grow: each percentage above the one before")
                    }
                }
                guard !steps.isEmpty else { throw stepsField.fail("must name at least one step") }
            } else {
                steps = defaultSteps.map { Step(percent: $0, minimumDwellSeconds: dwell, minimumComparedChains: chains) }
            }
            var plan = Rollout(steps: steps)
            plan.from = from ?? plan.from
            plan.to = to ?? plan.to
            if plan.from == plan.to, let field = o.optional("to") { throw field.fail("must name another adapter than from") }
            plan.autoAdvance = try o.optional("autoAdvance")?.bool() ?? false
            plan.guardIntervalSeconds = try o.optional("guardIntervalSeconds")?.integer(in: 1...60) ?? 60
            plan.agreementThreshold = try o.optional("agreementThreshold").map { (f) throws(VerificationError) in
                try share(f, "the share of compared purchase chains that must agree", above: 0)
            }
            plan.maximumFailureRate = try o.optional("maximumFailureRate").map { (f) throws(VerificationError) in
                try share(f, "the share of comparisons in which the adapter migrated to may fail", above: nil)
            }
            try o.finish()
            return plan
        }

        private static func decodeStep(_ item: ConfigField, dwell: Int64, chains: Int) throws(VerificationError) -> Step {
            if case .integer = item.node.value {
                return Step(percent: Int(try item.integer(in: 1...100)), minimumDwellSeconds: dwell, minimumComparedChains: chains)
            }
            let s = try item.object()
            let step = Step(percent: Int(try s.required("percent").integer(in: 1...100)),
                            minimumDwellSeconds: try s.optional("minimumDwellSeconds")?.integer(in: 0...31_536_000) ?? dwell,
                            minimumComparedChains: Int(try s.optional("minimumComparedChains")?.integer(in: 0...10_000_000)
                                ?? Int64(chains)))
            try s.finish()
            return step
        }

        /// A decimal string (the config formats carry no floats) within (0, 1] or [0, 1].
        private static func share(_ f: ConfigField, _ meaning: String, above lower: Double?) throws(VerificationError) -> Double {
            guard let rate = Double(try f.string()), rate.isFinite, rate <= 1, lower.map({ rate > $0 }) ?? (rate >= 0) else {
                throw f.fail("must be a decimal \(lower == nil ? "from 0" : "above 0") to 1 (\(meaning))")
            }
            return rate
        }
    }
}

/// Which accounts a rollout's percentage covers: a stable hash of (bundle id, account) read as a
/// point in 0..<10,000; an account is in the cohort at p % when its point is below p × 100. The
/// same on every instance and release, and raising the percentage only adds accounts.
public enum RolloutCohort {
    /// FNV-1a over the UTF-8 of the bundle id, a NUL and the account, finished with SplitMix64's
    /// mixer so nearby accounts ("user1", "user2") spread evenly.
    public static func point(bundleId: String, account: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bundleId.utf8 + [0] + account.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        hash ^= hash >> 30
        hash &*= 0xbf58_476d_1ce4_e5b9
        hash ^= hash >> 27
        hash &*= 0x94d0_49bb_1331_11eb
        hash ^= hash >> 31
        return Int(hash % 10_000)
    }

    public static func contains(percent: Int, bundleId: String, account: String) -> Bool {
        point(bundleId: bundleId, account: account) < percent * 100
    }
}

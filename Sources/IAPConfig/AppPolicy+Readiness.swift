import IAPCore

/// When a migration team may switch an app's receipts from verifyReceipt to the Server API: the
/// thresholds of the cutover verdict (the rule itself is `MigrationReport`'s; README, "Migration").
/// Absent from the app file: the documented defaults.
extension AppPolicy {
    public struct Readiness: Sendable, Equatable {
        /// Share of distinct purchase chains whose latest comparison agreed (default 0.995).
        public var agreementThreshold = 0.995
        /// Distinct purchase chains (`originalTransactionId`) compared, per environment (default 100).
        public var minimumPurchaseChains = 100
        /// Distinct accounts among them (default 20).
        public var minimumAccounts = 20
        /// Days between the first and the last comparison counted (default 7).
        public var minimumObservationDays = 7
        /// Path failure codes that do not block the verdict, each with the reason shown on the page
        /// (e.g. a code the team has traced to a known, accepted cause). Default none.
        public var explainedFailures: [String: String] = [:]

        public static let standard = Readiness()

        static func decode(_ field: ConfigField) throws(VerificationError) -> Readiness {
            let o = try field.object()
            var r = Readiness()
            if let f = o.optional("agreementThreshold") {
                // The config formats carry no floats: a decimal string, as routing.cutoverSampleRate.
                guard let rate = Double(try f.string()), rate.isFinite, rate > 0, rate <= 1 else {
                    throw f.fail("must be a decimal above 0 and at most 1 (the share of purchase chains that must agree)")
                }
                r.agreementThreshold = rate
            }
            if let f = o.optional("minimumPurchaseChains") { r.minimumPurchaseChains = Int(try f.integer(in: 1...10_000_000)) }
            if let f = o.optional("minimumAccounts") { r.minimumAccounts = Int(try f.integer(in: 1...10_000_000)) }
            if let f = o.optional("minimumObservationDays") { r.minimumObservationDays = Int(try f.integer(in: 0...3650)) }
            for item in try o.optional("explainedFailures")?.array() ?? [] {
                let entry = try item.object()
                let code = try entry.required("code").nonEmptyString()
                let reason = try entry.required("reason").nonEmptyString()
                try entry.finish()
                guard r.explainedFailures.updateValue(reason, forKey: code) == nil else { throw item.fail("\(code) listed twice") }
            }
            try o.finish()
            return r
        }
    }
}

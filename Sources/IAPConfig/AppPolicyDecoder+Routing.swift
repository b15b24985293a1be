import IAPCore

extension AppPolicyDecoder {
    /// `routing`: one entry per kind of evidence (receipts, transaction ids and signed transactions
    /// each required; any other kind a known adapter verifies may be routed too). An entry is a
    /// preset word (`legacy`, `serverAPI`, `shadow`, `compare`, `cutover`: what they have always
    /// meant; for receipts also `rollout`, with its plan in `routing.rollout`), an adapter id (that
    /// adapter alone), or `{answering, compared, beside}` naming two
    /// adapters and how the second runs beside the first. Every adapter named must be known to the
    /// gateway (`adapters`) and verify the kind it is routed.
    func decodeRouting(_ field: ConfigField) throws(VerificationError) -> AppPolicy.Routing {
        let o = try field.object()
        var modes: [AppPolicy.EvidenceKind: AppPolicy.RoutingMode] = [:]
        let routable = AppPolicy.EvidenceKind.configured
            + adapters.evidenceKinds.filter { !AppPolicy.EvidenceKind.configured.contains($0) }
        // Receipts in `rollout` answer per account (the plan below): no mode here until the plan is read.
        var receiptRollout: ConfigField?
        for kind in routable {
            let configured = AppPolicy.EvidenceKind.configured.contains(kind)
            guard let entry = configured ? try o.required(kind.rawValue) : o.optional(kind.rawValue) else { continue }
            if kind == .receipt, case .string("rollout") = entry.node.value {
                receiptRollout = entry
                continue
            }
            let mode = try decodeRoutingMode(entry)
            if let problem = adapters.problem(routing: kind, to: mode) { throw entry.fail(problem) }
            modes[kind] = mode
        }
        var sampleRate = 0.0
        if let rateField = o.optional("cutoverSampleRate") {
            // The config formats carry no floats: the rate is a decimal string, "0" to "1".
            let text = try rateField.string()
            guard let rate = Double(text), rate.isFinite, (0...1).contains(rate) else {
                throw rateField.fail("must be a decimal from 0 to 1 (the share of cutover requests also sent to verifyReceipt)")
            }
            sampleRate = rate
        }
        let rolloutField = o.optional("rollout")
        let rollout = try rolloutField.map { (f) throws(VerificationError) in try AppPolicy.Rollout.decode(f) }
        try o.finish()
        if let receiptRollout {
            guard let rollout, let rolloutField else { throw receiptRollout.fail("rollout needs a rollout plan (routing.rollout)") }
            if let problem = adapters.problem(routing: .receipt, to: rollout.insideCohort) { throw rolloutField.fail(problem) }
            modes[.receipt] = rollout.outsideCohort
        } else if let rolloutField {
            throw rolloutField.fail("only a receipt routing of rollout takes a plan")
        }
        var routing = AppPolicy.Routing(modes: modes)
        routing.cutoverSampleRate = sampleRate
        routing.rollout = rollout
        return routing
    }

    private func decodeRoutingMode(_ field: ConfigField) throws(VerificationError) -> AppPolicy.RoutingMode {
        if case .dictionary = field.node.value {
            let o = try field.object()
            let answering = try adapterId(o.required("answering"))
            let comparedField = o.optional("compared")
            let besideField = o.optional("beside")
            try o.finish()
            guard let comparedField else {
                if let besideField { throw besideField.fail("goes with compared") }
                return AppPolicy.RoutingMode(answering: answering)
            }
            guard let besideField else { throw comparedField.fail("needs beside (shadow, compare or cutover)") }
            let beside = try besideField.oneOf([("shadow", AppPolicy.RoutingMode.Beside.shadow), ("compare", .compare),
                                                ("cutover", .cutover)])
            let compared = try adapterId(comparedField)
            guard compared != answering else { throw comparedField.fail("an adapter is not compared with itself") }
            return AppPolicy.RoutingMode(answering: answering, compared: (compared, beside))
        }
        let word = try field.nonEmptyString()
        if let preset = AppPolicy.RoutingMode.configWords.first(where: { $0.0 == word }) { return preset.1 }
        return AppPolicy.RoutingMode(answering: try adapterId(field))
    }

    /// An adapter id the gateway knows; anything else is refused with the known ones (and, for a
    /// bare word, the presets too).
    private func adapterId(_ field: ConfigField) throws(VerificationError) -> AdapterID {
        let id = AdapterID(rawValue: try field.nonEmptyString())
        guard adapters.kinds[id] != nil else {
            let presets = AppPolicy.RoutingMode.configWords.map(\.0).joined(separator: ", ")
            throw field.fail("\"\(id)\" is neither a routing preset (\(presets)) nor a known adapter (\(adapters.ids.map(\.rawValue).joined(separator: ", ")))")
        }
        return id
    }
}
